"""Leaks: claims holding devices for nobody, on objects shaped as kube-apiserver writes them
and on the demo cluster, through the API, the page and the metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from claims.leaks import find_leaks, leak_report
from claims.models import Pod, ResourceClaim
from console.metrics import as_samples, render_metrics
from inventory.sync import apply_events
from tests import factories as f
from tests.console.demo import load_demo

GPU = "gpu.example.com"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _claim(name: str, *, device: str, allocated: datetime, status_written: datetime) -> Any:
    """A claim as the API server returns it: allocationTimestamp, and managedFields naming the
    scheduler's and the resourceclaim controller's status writes."""
    claim = f.claim_object(
        name, results=[f.allocation_result("req", driver=GPU, pool="node-a", device=device)]
    )
    claim["status"]["allocation"]["allocationTimestamp"] = _stamp(allocated)
    claim["metadata"]["creationTimestamp"] = _stamp(allocated - timedelta(hours=1))
    claim["metadata"]["managedFields"] = [
        {
            "manager": "kubectl",
            "operation": "Update",
            "time": _stamp(allocated - timedelta(hours=1)),
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "subresource": "status",
            "time": _stamp(allocated),
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "subresource": "status",
            "time": _stamp(status_written),
        },
    ]
    return claim


@pytest.fixture
def leaky(db, settings) -> dict[str, Any]:
    """One leak of each kind, plus a healthy reserved claim and a recently unreserved one."""
    settings.LEAK_UNRESERVED_SECONDS = 600
    objects = [
        f.node_object("node-a"),
        f.gpu_slice("node-a-gpu", count=6),
        # Unreserved for 2 hours: a leak since the controller's last status write.
        _claim(
            "forgotten",
            device="gpu-0",
            allocated=NOW - timedelta(hours=3),
            status_written=NOW - timedelta(hours=2),
        ),
        # Unreserved for 5 minutes: under the threshold.
        _claim(
            "just-released",
            device="gpu-1",
            allocated=NOW - timedelta(hours=1),
            status_written=NOW - timedelta(minutes=5),
        ),
        f.claim_object(
            "healthy",
            results=[f.allocation_result("req", driver=GPU, pool="node-a", device="gpu-2")],
            reserved_for=["healthy-pod"],
        ),
        f.claim_object(
            "ghost",
            results=[f.allocation_result("req", driver=GPU, pool="node-a", device="gpu-3")],
            reserved_for=["deleted-pod"],
        ),
        f.claim_object(
            "done",
            results=[f.allocation_result("req", driver=GPU, pool="node-a", device="gpu-4")],
            reserved_for=["finished-pod"],
        ),
        f.claim_object(
            "old-slice",
            results=[f.allocation_result("req", driver=GPU, pool="gone-node", device="gpu-0")],
            reserved_for=["healthy-pod"],
        ),
    ]
    orphan = f.claim_object("orphan-gpu-abc12")
    orphan["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "orphan",
            "uid": "uid-of-a-deleted-pod",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    objects.append(orphan)
    healthy_pod = f.pod_object("healthy-pod", claim="healthy", node="node-a")
    finished = f.pod_object("finished-pod", claim="done", node="node-a", phase="Succeeded")
    finished["status"]["containerStatuses"] = [
        {
            "name": "main",
            "ready": False,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": _stamp(NOW - timedelta(hours=5)),
                    "finishedAt": _stamp(NOW - timedelta(hours=4)),
                }
            },
        }
    ]
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    # reservedFor carries the pods' uids, as the scheduler writes them; old-slice shares the
    # healthy pod.
    healthy_uid = by_name["healthy"]["status"]["reservedFor"][0]["uid"]
    by_name["old-slice"]["status"]["reservedFor"][0]["uid"] = healthy_uid
    healthy_pod["metadata"]["uid"] = healthy_uid
    finished["metadata"]["uid"] = by_name["done"]["status"]["reservedFor"][0]["uid"]
    f.create(*objects, healthy_pod, finished)
    return by_name


def _by_kind(leaks: list[Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for leak in leaks:
        found.setdefault(leak.kind, set()).add(leak.claim)
    return found


def test_each_kind_of_leak_is_found(leaky) -> None:
    """Each constructed leak is reported under its kind, and nothing healthy is."""
    assert _by_kind(find_leaks(now=NOW)) == {
        "unreserved": {"forgotten"},
        "reserved-for-missing-pod": {"ghost"},
        "reserved-for-finished-pod": {"done"},
        "owner-pod-gone": {"orphan-gpu-abc12"},
        "device-in-missing-pool": {"old-slice"},
    }


def test_since_comes_from_the_stored_times(leaky) -> None:
    """Unreserved counts from the last status write; a finished pod from its containers' end."""
    leaks = {leak.kind: leak for leak in find_leaks(now=NOW)}
    assert leaks["unreserved"].since == NOW - timedelta(hours=2)
    assert leaks["unreserved"].since_source == "managedFields status time"
    assert leaks["unreserved"].devices == (f"{GPU}/node-a/gpu-0",)
    assert leaks["reserved-for-finished-pod"].since == NOW - timedelta(hours=4)
    assert leaks["reserved-for-missing-pod"].since is None
    assert leaks["device-in-missing-pool"].since is None


def test_owner_leak_since_its_deletion_and_devices_of_each_leak(leaky) -> None:
    """An orphaned claim already being deleted counts from its deletionTimestamp; every leak
    lists the devices its claim holds."""
    orphan = ResourceClaim.objects.get(name="orphan-gpu-abc12")
    raw = dict(orphan.raw)
    raw["metadata"] = {
        **raw["metadata"],
        "deletionTimestamp": _stamp(NOW - timedelta(minutes=30)),
        "resourceVersion": "999999",
    }
    apply_events("ResourceClaim", [("MODIFIED", raw)])
    leaks = {leak.kind: leak for leak in find_leaks(now=NOW)}
    owner = leaks["owner-pod-gone"]
    assert (owner.since, owner.since_source) == (NOW - timedelta(minutes=30), "deletionTimestamp")
    for kind in ("unreserved", "reserved-for-missing-pod", "device-in-missing-pool"):
        stored = ResourceClaim.objects.get(name=leaks[kind].claim)
        expected = tuple(entry.key for entry in stored.allocated_devices.all())
        assert expected and leaks[kind].devices == expected


def test_threshold_setting_decides_unreserved(leaky, settings) -> None:
    """A lower DASHBOARD_LEAK_UNRESERVED_SECONDS also reports the claim released 5 minutes ago."""
    settings.LEAK_UNRESERVED_SECONDS = 60
    assert _by_kind(find_leaks(now=NOW))["unreserved"] == {"forgotten", "just-released"}


def test_api_page_and_metrics(leaky, api, viewer_user) -> None:
    """The API lists the leaks with counts, the page shows them, the metrics count them."""
    viewer_client = Client()
    viewer_client.force_login(viewer_user)
    response = api.get("/api/claims/leaks/")
    assert response.status_code == 200
    body = response.json()
    assert body["counts"] == leak_report()["counts"]
    assert body["pods_checked"] is True
    assert {leak["claim"] for leak in body["leaks"]} >= {"forgotten", "ghost", "done"}
    page = viewer_client.get("/leaks/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-kind="owner-pod-gone"' in html and "orphan-gpu-abc12" in html
    assert 'href="/leaks/"' in html  # the nav link
    only = viewer_client.get("/leaks/", {"kind": "unreserved"}).content.decode()
    assert "forgotten" in only and "ghost" not in only
    samples = dict(as_samples(render_metrics(now=NOW).decode()))
    counts = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "dra_dashboard_leaks"
    }
    at_now = leak_report(now=NOW)["counts"]
    assert counts == {kind: float(n) for kind, n in at_now.items()}
    age = samples[("dra_dashboard_leak_oldest_age_seconds", (("kind", "unreserved"),))]
    assert age == timedelta(hours=2).total_seconds()


def test_demo_cluster_deleted_pod_leaves_a_leak(db) -> None:
    """On the demo, deleting a running pod's object (without the controller cleaning up)
    makes its claim's reservation a leak; before that, no reservation is leaked."""
    objects = load_demo(nodes=10, seed=3)
    before = _by_kind(find_leaks())
    assert "reserved-for-missing-pod" not in before
    assert "reserved-for-finished-pod" not in before
    reserved = next(
        claim
        for claim in objects["ResourceClaim"]
        if (claim.get("status") or {}).get("reservedFor")
    )
    pod_name = reserved["status"]["reservedFor"][0]["name"]
    namespace = reserved["metadata"]["namespace"]
    pod = next(
        p
        for p in objects["Pod"]
        if p["metadata"]["name"] == pod_name and p["metadata"]["namespace"] == namespace
    )
    apply_events("Pod", [("DELETED", pod)], publish=False)
    assert not Pod.objects.filter(namespace=namespace, name=pod_name).exists()
    after = _by_kind(find_leaks())
    assert reserved["metadata"]["name"] in after["reserved-for-missing-pod"]
    assert ResourceClaim.objects.filter(name=reserved["metadata"]["name"]).exists()
