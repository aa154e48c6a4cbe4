"""Filters of every endpoint, including device attribute equality in every v1 value type."""

from __future__ import annotations

import pytest

from tests.api.conftest import names
from tests.api.endpoints import GPU_A, GPU_B

DEVICES = "/api/inventory/devices/"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"driver": "gpu.example.com"}, GPU_A | GPU_B),
        ({"pool": "node-b"}, GPU_B),
        ({"node": "node-b"}, GPU_B),
        ({"class": "gpu.example.com"}, GPU_A | GPU_B),
        # By the class's CEL selector, not only its driver: node-b's GPUs are a100s.
        ({"class": "h100-only"}, GPU_A),
        ({"class": "h100-only", "state": "free"}, {"gpu.example.com/node-a/gpu-4"}),
        (
            {"state": "free", "driver": "gpu.example.com"},
            {"gpu.example.com/node-a/gpu-4", "gpu.example.com/node-b/gpu-1"},
        ),
        ({"state": "admin"}, {"gpu.example.com/node-b/gpu-0"}),
        ({"state": "shared"}, {"net.example.com/node-a-net/nic-0"}),
        ({"state": "tainted"}, {"gpu.example.com/node-a/gpu-2", "gpu.example.com/node-a/gpu-3"}),
        (
            {"state": ["allocated", "shared"]},
            {
                "gpu.example.com/node-a/gpu-0",
                "gpu.example.com/node-a/gpu-1",
                "mig.example.com/node-a-mig/mig-1g-0",
                "mig.example.com/node-a-mig/mig-1g-1",
                "net.example.com/node-a-net/nic-0",
            },
        ),
        ({"tainted": "true"}, {"gpu.example.com/node-a/gpu-2", "gpu.example.com/node-a/gpu-3"}),
        ({"q": "nic"}, {"net.example.com/node-a-net/nic-0"}),
        (
            {"namespace": "team-b"},
            {"gpu.example.com/node-b/gpu-0", "net.example.com/node-a-net/nic-0"},
        ),
    ],
)
def test_device_filters(api, cluster, params, expected) -> None:
    """Each device filter keeps exactly the devices the cluster fixture built for it."""
    assert set(names(api.get(DEVICES, params), "key")) == expected


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        # Unqualified names stored unqualified, and qualified queries in the driver's domain.
        ("model=h100", GPU_A),
        ("gpu.example.com/model=h100", GPU_A),
        # Stored qualified: an unqualified query resolves in each device's driver domain.
        ("model=a100", GPU_B),
        ("gpu.example.com/model=a100", GPU_B),
        ("other.example.com/model=h100", set()),
        ("model=v100", set()),
        ("index=3", {"gpu.example.com/node-a/gpu-3"}),
        ("index=03", {"gpu.example.com/node-a/gpu-3"}),
        ("ecc=true", GPU_B),
        ("ecc=false", set()),
        ("driverVersion=1.2.3", GPU_B),
        ("gpu.example.com/driverVersion=1.2.3", GPU_B),
    ],
)
def test_device_attribute_equality(api, cluster, term: str, expected: set[str]) -> None:
    """`attribute=[domain/]name=value` compares string, int, bool and version values."""
    assert set(names(api.get(DEVICES, {"attribute": term}), "key")) == expected


def test_device_attribute_terms_combine_with_and(api, cluster) -> None:
    """Repeated attribute terms must all hold."""
    both = api.get(DEVICES, {"attribute": ["model=h100", "index=1"]})
    assert names(both, "key") == ["gpu.example.com/node-a/gpu-1"]


@pytest.mark.parametrize(
    ("url", "params", "expected"),
    [
        ("/api/inventory/nodes/", {"ready": "false"}, {"node-b"}),
        ("/api/inventory/nodes/", {"name": "node-a"}, {"node-a"}),
        ("/api/inventory/pools/", {"driver": "mig.example.com"}, {"node-a-mig"}),
        ("/api/inventory/pools/", {"node": "node-b"}, {"node-b"}),
        (
            "/api/inventory/pools/",
            {"complete": "true", "driver": "net.example.com"},
            {"node-a-net"},
        ),
        ("/api/inventory/resource-slices/", {"pool": "node-a"}, {"node-a-gpu"}),
        ("/api/inventory/resource-slices/", {"node": "node-b"}, {"node-b-gpu"}),
        ("/api/inventory/device-taint-rules/", {"device": "gpu-2"}, {"maintenance"}),
        ("/api/inventory/device-taint-rules/", {"device": "gpu-3"}, set()),
        ("/api/inventory/resource-classes/", {"driver": "classic.example.com"}, {"classic-gpu"}),
        ("/api/inventory/counter-sets/", {"pool": "node-a-mig"}, {"gpu-0-counters"}),
        ("/api/inventory/counter-sets/", {"node": "node-b"}, set()),
        ("/api/inventory/device-classes/", {"q": "h100"}, {"h100-only"}),
        ("/api/claims/resource-claims/", {"namespace": "team-b"}, {"monitor", "waiting", "net-b"}),
        ("/api/claims/resource-claims/", {"state": "pending"}, {"waiting"}),
        ("/api/claims/resource-claims/", {"state": "reserved"}, {"train-0"}),
        ("/api/claims/resource-claims/", {"node": "node-a"}, {"train-0", "train-1"}),
        ("/api/claims/resource-claims/", {"class": "net.example.com"}, {"net-a", "net-b"}),
        ("/api/claims/resource-claims/", {"driver": "mig.example.com"}, {"mig-a", "mig-b"}),
        ("/api/claims/resource-claims/", {"pool": "node-b"}, {"monitor"}),
        ("/api/claims/resource-claim-templates/", {"class": "gpu.example.com"}, {"gpu-template"}),
        ("/api/claims/resource-claim-templates/", {"class": "mig.example.com"}, set()),
        ("/api/claims/pods/", {"phase": "Pending"}, {"pending-pod"}),
        ("/api/claims/pods/", {"node": "node-a"}, {"train-0-pod"}),
        ("/api/claims/resource-quotas/", {"namespace": "team-b"}, set()),
        ("/api/claims/pod-scheduling-contexts/", {"node": "node-a"}, {"pending-pod"}),
    ],
)
def test_filters(api, cluster, url: str, params: dict[str, str], expected: set[str]) -> None:
    """Each filter keeps exactly the objects the cluster fixture built for it."""
    assert set(names(api.get(url, params))) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"namespace": "team-b"}, {"monitor", "net-b"}),
        ({"driver": "net.example.com"}, {"net-a", "net-b"}),
        ({"admin_access": "true"}, {"monitor"}),
        ({"node": "node-a"}, {"train-0", "train-1"}),
        ({"claim": "mig-a"}, {"mig-a"}),
        ({"device": "gpu-0", "pool": "node-a"}, {"train-0"}),
    ],
)
def test_allocated_device_filters(api, cluster, params, expected) -> None:
    """Allocation results filter by their claim's namespace and node, and by device identity."""
    response = api.get("/api/claims/allocated-devices/", params)
    assert set(names(response, "claim_name")) == expected


def test_sync_status_filters(api, sync_rows) -> None:
    """Sync status filters by kind; skipped objects by kind and name."""
    assert names(api.get("/api/inventory/sync-status/", {"kind": "Node"}), "kind") == ["Node"]
    skipped = api.get("/api/inventory/skipped-objects/", {"kind": "Node"})
    assert names(skipped) == []
