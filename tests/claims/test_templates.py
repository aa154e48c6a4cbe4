"""Claims made from a pod's template entry are linked to that template when their pod is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from claims.models import ResourceClaim
from claims.templates import POD_CLAIM_NAME
from inventory.sync import upsert_events


def _claim(namespace: str, pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{pod}-gpu-x1",
            "namespace": namespace,
            "uid": f"u-claim-{namespace}",
            "annotations": {POD_CLAIM_NAME: "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "p"}],
        },
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}},
    }


def _pod(namespace: str, name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"u-pod-{namespace}"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


@pytest.mark.django_db
def test_pods_of_one_name_in_two_namespaces_link_their_own_claims() -> None:
    """Claims written before their pods get the template their own pod's entry names, though
    another namespace has a pod of the same name; the claims are found by owner_pod's index."""
    upsert_events("ResourceClaim", [(_claim("a", "job"), None), (_claim("b", "job"), None)])
    assert set(ResourceClaim.objects.values_list("template_name", flat=True)) == {""}
    with CaptureQueriesContext(connection) as queries:
        upsert_events("Pod", [(_pod("a", "job", "small"), None), (_pod("b", "job", "big"), None)])
    linked = dict(ResourceClaim.objects.values_list("namespace", "template_name"))
    assert linked == {"a": "small", "b": "big"}
    reads = [q["sql"] for q in queries if q["sql"].startswith('SELECT "claims_resourceclaim"')]
    assert len(reads) == 1 and '"owner_pod" IN' in reads[0] and '"namespace" IN' not in reads[0]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + reads[0])
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "claim_owner_pod_idx" in plan
