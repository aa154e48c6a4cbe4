"""Each pending claim's diagnosis names its own claim, also when specs repeat (replicas)."""

from __future__ import annotations

import json
from typing import Any

from claims.models import ResourceClaim
from claims.whatif.diagnosis import diagnose_all
from tests.claims.whatif.cluster import DRIVER, GPUS_PER_NODE
from tests.claims.whatif.conftest import load_objects


def _claim(name: str) -> dict[str, Any]:
    # More GPUs than any node has: the claim cannot fit, so the diagnosis explains it.
    exactly = {"deviceClassName": DRIVER, "count": GPUS_PER_NODE + 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
        "status": {"phase": "Pending"},
    }


def test_replicas_with_the_same_spec_each_name_their_own_claim(small) -> None:
    """Two replicas' identical pending claims get diagnoses naming themselves, not each other."""
    names = ["web-0-gpu", "web-1-gpu"]
    load_objects([*(_claim(n) for n in names), *(_pod(f"pod-{n}", n) for n in names)])
    diagnose_all(force=True)
    for name in names:
        diagnosis = ResourceClaim.objects.get(name=name).diagnosis
        text = json.dumps(diagnosis)
        other = next(n for n in names if n != name)
        assert diagnosis["fits"] is False
        assert f"team/{name}" in text
        assert f"team/{other}" not in text
        assert {r["claim"] for r in diagnosis["requests"]} == {f"team/{name}"}
