"""A pending claim's page diagnoses it when opened: holders named, computed once per state."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from claims.models import ResourceClaim
from claims.whatif import diagnosis as diagnosis_module
from claims.whatif.diagnosis import diagnose_claim
from dashboard import scope
from tests import factories as f
from tests.claims.whatif.cluster import DRIVER
from tests.claims.whatif.conftest import load_objects

NAMESPACE = "team"


def _held(name: str, node: str, device: str, pod: str) -> dict[str, Any]:
    """An allocated claim holding one GPU of `node`, reserved for `pod`."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "other", "uid": f"uid-{name}"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
        },
    }


def _pending(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
    }


def _pod(name: str, namespace: str, claim: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


@pytest.fixture
def full(small) -> None:
    """Every GPU of the two nodes the waiting pod may use (node-a, node-b) is held; node-c is
    tainted and node-d cordoned, so the pending claim `team/wants-gpu` cannot be placed."""
    objects: list[dict[str, Any]] = []
    for node in ("node-a", "node-b"):
        for index in (0, 1):
            claim = f"{node}-holder-{index}"
            pod = f"{claim}-pod"
            objects += [_held(claim, node, f"gpu-{index}", pod), _pod(pod, "other", claim, node)]
    objects += [_pending("wants-gpu"), _pod("waiter", NAMESPACE, "wants-gpu")]
    load_objects(objects)
    diagnosis_module.COMPUTED[0] = 0


def test_opening_the_page_diagnoses_a_claim_nobody_diagnosed(full, viewer_client: Client) -> None:
    """No background run: the first opening computes, stores and shows the diagnosis."""
    assert ResourceClaim.objects.get(name="wants-gpu").diagnosis is None
    page = viewer_client.get(reverse("claim-detail", args=[NAMESPACE, "wants-gpu"]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "No diagnosis" not in text
    assert 'id="pending-nofit"' in text
    stored = ResourceClaim.objects.get(name="wants-gpu").diagnosis
    assert stored["fits"] is False and stored["pods"] == ["waiter"]
    assert diagnosis_module.COMPUTED[0] == 1
    # Opened again on the same cluster state: read, not computed.
    viewer_client.get(reverse("claim-detail", args=[NAMESPACE, "wants-gpu"]))
    assert diagnosis_module.COMPUTED[0] == 1


def test_the_diagnosis_names_the_claims_and_pods_holding_the_devices(
    full, viewer_client: Client
) -> None:
    """Each device the claim could use names its holder claim and the pod reserving it."""
    made = diagnose_claim(NAMESPACE, "wants-gpu")
    assert made is not None
    [request] = made["requests"]
    assert request["stage"] == "already allocated"
    node = made["best"][0]["node"]
    holders = {entry["device"]: entry["claims"] for entry in request["taken"]}
    assert set(holders) == {f"{DRIVER}/{node}/gpu-0", f"{DRIVER}/{node}/gpu-1"}
    for index in (0, 1):
        [holder] = holders[f"{DRIVER}/{node}/gpu-{index}"]
        claim = f"{node}-holder-{index}"
        assert holder == {
            "namespace": "other",
            "name": claim,
            "pods": [{"namespace": "other", "name": f"{claim}-pod"}],
        }
    text = viewer_client.get(reverse("claim-detail", args=[NAMESPACE, "wants-gpu"])).content
    assert reverse("claim-detail", args=["other", f"{node}-holder-0"]).encode() in text
    assert reverse("pod-detail", args=["other", f"{node}-holder-0-pod"]).encode() in text


def test_a_change_to_the_cluster_makes_the_next_opening_compute_again(full) -> None:
    """The stored diagnosis is keyed on the cluster state: a freed device is seen at once."""
    first = diagnose_claim(NAMESPACE, "wants-gpu")
    assert first is not None and first["fits"] is False
    freed = _held("node-a-holder-0", "node-a", "gpu-0", "node-a-holder-0-pod")
    del freed["status"]
    load_objects([freed])
    second = diagnose_claim(NAMESPACE, "wants-gpu")
    assert second is not None and second["fits"] is True
    assert second["fingerprint"] != first["fingerprint"]
    assert diagnosis_module.COMPUTED[0] == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_openings_compute_once(full) -> None:
    """Eight threads opening the same claim together make one computation; all get it."""
    start = threading.Barrier(8)
    answers: list[Any] = []
    errors: list[BaseException] = []

    def open_page() -> None:
        try:
            start.wait()
            answers.append(diagnose_claim(NAMESPACE, "wants-gpu"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=scope.carried(open_page)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert diagnosis_module.COMPUTED[0] == 1
    assert len(answers) == 8
    assert all(answer == answers[0] for answer in answers)
    assert answers[0]["fits"] is False


def test_a_partition_blocked_by_counters_names_the_claim_holding_its_sibling(db) -> None:
    """The whole MIG GPU is free but one of its slices is held: the GPU is stopped at
    "counters or capacity" and its holder is the claim on the slice, with its pod."""
    gpu = "gpu.example.com"
    f.create(
        f.node_object("node-a"),
        f.device_class_object("whole", expression=f'device.attributes["{gpu}"].type == "gpu"'),
        *f.mig_gpu_slices("node-a", driver=gpu),
        f.claim_object(
            "slice-user",
            device_class="mig",
            results=[f.allocation_result("req", driver=gpu, pool="node-a", device="gpu-0-mig-3")],
            node="node-a",
            reserved_for=["slice-pod"],
        ),
        f.claim_object("wants-whole", device_class="whole"),
    )
    made = diagnose_claim("team-a", "wants-whole")
    assert made is not None and made["fits"] is False
    [request] = made["requests"]
    assert request["stage"] == "counters or capacity"
    [taken] = request["taken"]
    assert (taken["device"], taken["stage"]) == (f"{gpu}/node-a/gpu-0", "counters or capacity")
    assert taken["claims"] == [
        {
            "namespace": "team-a",
            "name": "slice-user",
            "pods": [{"namespace": "team-a", "name": "slice-pod"}],
        }
    ]
