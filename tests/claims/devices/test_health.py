"""Device health: pods' allocatedResourcesStatus (KEP-4680) synced and shown per device and per
claim beside NoExecute taints and device status conditions, and counted as unhealthy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from claims.devices.counts import pool_device_counts
from claims.devices.pages import grid_counts, pool_grid
from claims.models import Pod, ResourceClaim
from inventory.models import Device, Pool
from tests import factories as f
from tests.console.demo import load_demo

NVIDIA = "gpu.nvidia.com"
POOL = "node-gpu-1"


def _report(pod: dict[str, Any], *, reference: str, device: str, health: str) -> dict[str, Any]:
    """The pod with the kubelet's health report for one device of its claim reference."""
    reported = copy.deepcopy(pod)
    reported["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
    reported["status"]["containerStatuses"] = [
        {
            "name": "main",
            "ready": True,
            "state": {"running": {"startedAt": "2026-06-01T10:00:00Z"}},
            "allocatedResourcesStatus": [
                {
                    "name": f"claim:{reference}/gpu",
                    "resources": [
                        {
                            "resourceID": f"{NVIDIA}/{POOL}/{device}",
                            "health": health,
                            "message": "XID 79: GPU has fallen off the bus",
                        }
                    ],
                },
                # A device plugin resource in the same list is not DRA and is ignored.
                {
                    "name": "nvidia.com/gpu",
                    "resources": [{"resourceID": "GPU-1", "health": health}],
                },
            ],
        }
    ]
    return reported


def _gpus(count: int) -> list[dict[str, Any]]:
    return [
        f.device_entry(
            f"gpu-{i}",
            attributes={
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "uuid": {"string": f"GPU-0000000{i}"},
            },
            capacity={"memory": "80Gi"},
        )
        for i in range(count)
    ]


@pytest.fixture
def gpu_node(db) -> dict[str, Any]:
    """Four H100s as NVIDIA's driver publishes them; a pod made from a template holds gpu-0 and
    the kubelet reports it Unhealthy; gpu-1 carries a NoExecute taint; gpu-2's claim reports
    Ready=False in its device status."""
    claim = f.claim_object(
        "trainer-gpu-x7k2p",
        device_class="gpu.nvidia.com",
        results=[f.allocation_result("gpu", driver=NVIDIA, pool=POOL, device="gpu-0")],
        reserved_for=["trainer"],
    )
    pod = f.pod_object("trainer", claim="unused", node=POOL)
    pod["metadata"]["uid"] = claim["status"]["reservedFor"][0]["uid"]
    # The pod gets its claim from a template: the claim's name is in resourceClaimStatuses.
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "h100"}]
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpus", "resourceClaimName": "trainer-gpu-x7k2p"}
    ]
    devices = _gpus(4)
    devices[1]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoExecute"}]
    not_ready = f.claim_object(
        "inference",
        results=[f.allocation_result("gpu", driver=NVIDIA, pool=POOL, device="gpu-2")],
    )
    not_ready["status"]["devices"] = [
        {
            "driver": NVIDIA,
            "pool": POOL,
            "device": "gpu-2",
            "conditions": [{"type": "Ready", "status": "False", "reason": "EccError"}],
        }
    ]
    f.create(
        f.node_object(POOL),
        f.slice_object(POOL, driver=NVIDIA, pool=POOL, node=POOL, devices=devices),
        claim,
        not_ready,
        pod,
    )
    f.create(_report(pod, reference="gpus", device="gpu-0", health="Unhealthy"))
    return {"pod": pod, "claim": claim}


def _device(name: str) -> Device:
    return Device.objects.get(driver=NVIDIA, pool_name=POOL, name=name)


def test_sync_keeps_the_reports(gpu_node) -> None:
    """The pod row keeps each DRA report flattened; device plugin entries are left out."""
    pod = Pod.objects.get(name="trainer")
    assert pod.resource_health == [
        {
            "container": "main",
            "claim": "gpus",
            "request": "gpu",
            "resourceID": f"{NVIDIA}/{POOL}/gpu-0",
            "health": "Unhealthy",
            "message": "XID 79: GPU has fallen off the bus",
        }
    ]


def test_device_detail_shows_health_from_every_source(gpu_node, api) -> None:
    """Device detail lists the pod's report, NoExecute taints and device status conditions."""
    reported = api.get(f"/api/inventory/devices/{_device('gpu-0').pk}/").json()["health"]
    assert [(h["source"], h["health"], h["claim"]) for h in reported] == [
        ("pod", "Unhealthy", "team-a/trainer-gpu-x7k2p")
    ]
    tainted = api.get(f"/api/inventory/devices/{_device('gpu-1').pk}/").json()["health"]
    assert [h["source"] for h in tainted] == ["taint"]
    assert tainted[0]["taint"]["effect"] == "NoExecute"
    conditions = api.get(f"/api/inventory/devices/{_device('gpu-2').pk}/").json()["health"]
    assert conditions[0]["source"] == "device-status"
    assert conditions[0]["conditions"][0]["reason"] == "EccError"
    assert api.get(f"/api/inventory/devices/{_device('gpu-3').pk}/").json()["health"] == []


def test_claim_detail_shows_health(gpu_node, api) -> None:
    """The claim's detail carries the reports about it, resolved through the pod's template."""
    claim = ResourceClaim.objects.get(name="trainer-gpu-x7k2p")
    health = api.get(f"/api/claims/resource-claims/{claim.pk}/").json()["health"]
    assert [(h["source"], h["resourceID"], h["health"]) for h in health] == [
        ("pod", f"{NVIDIA}/{POOL}/gpu-0", "Unhealthy")
    ]
    other = ResourceClaim.objects.get(name="inference")
    assert api.get(f"/api/claims/resource-claims/{other.pk}/").json()["health"][0]["source"] == (
        "device-status"
    )


def test_unhealthy_filter_grid_and_counts_include_reports(gpu_node, api) -> None:
    """state=unhealthy, the pool grid and the pool counts all include the reported device."""
    listed = api.get("/api/inventory/devices/", {"state": "unhealthy", "driver": NVIDIA}).json()
    assert {d["name"] for d in listed["results"]} == {"gpu-0", "gpu-1", "gpu-2"}
    pool = Pool.objects.get(driver=NVIDIA, name=POOL)
    states = {cell["device"].name: cell["state"] for cell in pool_grid(pool)}
    assert states["gpu-0"] == "unhealthy"
    assert states["gpu-3"] == "free"
    counts = pool_device_counts()[(NVIDIA, POOL)]
    assert counts["unhealthy"] == grid_counts(pool_grid(pool))["unhealthy"] == 3


@pytest.mark.parametrize(("health", "phase"), [("Healthy", "Running"), ("Unhealthy", "Failed")])
def test_healthy_or_finished_reports_do_not_make_unhealthy(gpu_node, api, health, phase) -> None:
    """A Healthy report, or any report of a finished pod, leaves the device healthy."""
    pod = _report(gpu_node["pod"], reference="gpus", device="gpu-0", health=health)
    pod["metadata"]["resourceVersion"] = "99999"
    pod["status"]["phase"] = phase
    f.create(pod)
    listed = api.get("/api/inventory/devices/", {"state": "unhealthy", "driver": NVIDIA}).json()
    assert "gpu-0" not in {d["name"] for d in listed["results"]}


def test_demo_pod_report_marks_its_device(db, api) -> None:
    """On the demo, a running pod's Unhealthy report turns its claim's device unhealthy
    everywhere devices are listed."""
    objects = load_demo(nodes=10, seed=2)
    claims = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in objects["ResourceClaim"]
    }
    for pod in objects["Pod"]:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        namespace = pod["metadata"]["namespace"]
        refs = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod["status"].get("resourceClaimStatuses") or [])
        }
        refs.update(
            {
                r["name"]: r["resourceClaimName"]
                for r in pod["spec"].get("resourceClaims") or []
                if r.get("resourceClaimName")
            }
        )
        held = [
            (ref, claims[(namespace, name)])
            for ref, name in refs.items()
            if name and (claims.get((namespace, name)) or {}).get("status", {}).get("allocation")
        ]
        if held:
            break
    else:
        raise AssertionError("the demo has no running pod holding an allocated claim")
    reference, claim = held[0]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    report = copy.deepcopy(pod)
    report["metadata"]["resourceVersion"] = "99999"
    report["status"]["containerStatuses"] = [
        {
            "name": "main",
            "allocatedResourcesStatus": [
                {
                    "name": f"claim:{reference}/{result['request']}",
                    "resources": [
                        {
                            "resourceID": f"{result['driver']}/{result['pool']}/{result['device']}",
                            "health": "Unhealthy",
                        }
                    ],
                }
            ],
        }
    ]
    f.store("Pod", report)
    listed = api.get(
        "/api/inventory/devices/",
        {"state": "unhealthy", "driver": result["driver"], "pool": result["pool"]},
    ).json()
    assert result["device"] in {d["name"] for d in listed["results"]}
    stored = ResourceClaim.objects.get(
        namespace=claim["metadata"]["namespace"], name=claim["metadata"]["name"]
    )
    health = api.get(f"/api/claims/resource-claims/{stored.pk}/").json()["health"]
    assert any(h["source"] == "pod" and h["health"] == "Unhealthy" for h in health)
