"""GET /api/inventory/pool-status/: upstream's ResourcePoolStatusRequest, answered from the
synced state, on the hand-built cluster and on a MIG GPU pool as NVIDIA's driver publishes it."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f

URL = "/api/inventory/pool-status/"
NVIDIA = "gpu.nvidia.com"


def _pools(response: Any) -> dict[str, dict[str, Any]]:
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["apiVersion"] == "resource.k8s.io/v1alpha3"
    assert body["kind"] == "ResourcePoolStatusRequest"
    assert body["status"]["conditions"][0]["type"] == "Complete"
    return {pool["poolName"]: pool for pool in body["status"].get("pools", [])}


def test_counts_follow_device_states(api, cluster) -> None:
    """Allocated, tainted (unavailable) and free (available) GPUs are counted as built."""
    pools = _pools(api.get(URL, {"driver": "gpu.example.com"}))
    assert set(pools) == {"node-a", "node-b"}
    node_a = pools["node-a"]
    assert node_a["totalDevices"] == 5
    assert node_a["allocatedDevices"] == 2
    assert node_a["unavailableDevices"] == 2  # gpu-2 by a rule, gpu-3 by its own taint
    assert node_a["availableDevices"] == 1
    assert node_a["nodeName"] == "node-a"
    assert node_a["resourceSliceCount"] == 1
    # Admin access does not take a device.
    assert pools["node-b"]["availableDevices"] == 2
    assert pools["node-b"]["allocatedDevices"] == 0


def test_shareable_summary_adds_consumed_capacity(api, cluster) -> None:
    """The shared NIC reports 40G of its 100G bandwidth consumed by its two shares."""
    pools = _pools(api.get(URL, {"driver": "net.example.com"}))
    summary = pools["node-a-net"]["shareableSummary"]
    assert summary["fullyAvailableDevices"] == 0
    assert summary["partiallyAvailableDevices"] == 1
    assert summary["capacity"] == [
        {"name": "bandwidth", "total": "100G", "consumed": "40G", "available": "60G"}
    ]
    assert "shareableSummary" not in _pools(api.get(URL, {"pool": "node-a"}))["node-a"]


def test_incomplete_pool_has_validation_error_and_no_counts(api, db) -> None:
    """A pool missing one of its two slices is listed with a validation error, counts unset."""
    f.create(f.gpu_slice("half", pool="split", slice_count=2))
    pool = _pools(api.get(URL))["split"]
    assert pool["validationError"].startswith("incomplete: 1 of 2")
    assert "totalDevices" not in pool
    assert "resourceSliceCount" not in pool


def test_filters_and_limit(api, cluster) -> None:
    """driver, pool, node and class narrow the pools; limit truncates but poolCount does not."""
    body = api.get(URL, {"limit": 1}).json()
    assert body["status"]["poolCount"] == 4
    assert len(body["status"]["pools"]) == 1
    assert body["spec"]["limit"] == 1
    assert set(_pools(api.get(URL, {"node": "node-b"}))) == {"node-b"}
    assert set(_pools(api.get(URL, {"class": "h100-only"}))) == {"node-a"}
    assert set(_pools(api.get(URL, {"driver": "mig.example.com", "pool": "node-a-mig"}))) == {
        "node-a-mig"
    }
    empty = api.get(URL, {"driver": "nothing.example.com"}).json()
    assert empty["status"]["poolCount"] == 0
    assert "pools" not in empty["status"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"class": "missing"}, "class")],
)
def test_bad_parameters_are_400(api, cluster, params, field) -> None:
    """A limit out of 1..1000 or an unknown DeviceClass is a 400 naming the parameter."""
    response = api.get(URL, params)
    assert response.status_code == 400
    assert field in response.json()


def _mig_device(gpu: int, profile: str, start: int, size: int, memory: str) -> dict[str, Any]:
    """A MIG partition as NVIDIA's DRA driver publishes it: unqualified attributes of its own
    domain, and consumption of the parent GPU's counter set (multiprocessors, memory slices)."""
    slices = {f"memory-slice-{i}": "1" for i in range(start, start + size)}
    return f.device_entry(
        f"gpu-{gpu}-mig-{profile}-{start}",
        attributes={
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "productName": {"string": "NVIDIA A100-SXM4-40GB"},
            "parentIndex": {"int": gpu},
        },
        capacity={"memory": memory},
        consumes={
            f"gpu-{gpu}-counter-set": {
                "multiprocessors": str(14 * size if size < 8 else 98),
                "memory": memory,
                **slices,
            }
        },
    )


@pytest.fixture
def mig_pool(db) -> dict[str, Any]:
    """One A100 (8 memory slices, 98 SMs, 40Gi) offered as a full GPU, 7 x 1g.5gb and 3 x
    2g.10gb partitions; the slice names `profile` as its partition type attribute; one 1g.5gb
    is allocated."""
    counters = {"multiprocessors": "98", "memory": "40Gi"}
    counters.update({f"memory-slice-{i}": "1" for i in range(8)})
    devices = [_mig_device(0, "1g.5gb", i, 1, "5Gi") for i in range(7)]
    devices += [_mig_device(0, "2g.10gb", i, 2, "10Gi") for i in (0, 2, 4)]
    devices.append(_mig_device(0, "full", 0, 8, "40Gi"))
    slice_obj = f.slice_object(
        "node-gpu-1-mig",
        driver=NVIDIA,
        pool="node-gpu-1",
        node="node-gpu-1",
        devices=devices,
        counters={"gpu-0-counter-set": counters},
    )
    slice_obj["spec"]["partitionTypeAttribute"] = f"{NVIDIA}/profile"
    claim = f.claim_object(
        "mig-user",
        device_class="mig.nvidia.com",
        results=[
            f.allocation_result(
                "req", driver=NVIDIA, pool="node-gpu-1", device="gpu-0-mig-1g.5gb-0"
            )
        ],
    )
    return {"objects": f.create(f.node_object("node-gpu-1"), slice_obj, claim)}


def test_partition_summary_of_a_mig_gpu(api, mig_pool) -> None:
    """Per MIG profile: how many partitions exist and how many more fit the counters left."""
    pool = _pools(api.get(URL, {"driver": NVIDIA}))["node-gpu-1"]
    summary = {entry["type"]: entry for entry in pool["partitionSummary"]}
    assert {entry["attribute"] for entry in summary.values()} == {f"{NVIDIA}/profile"}
    assert summary["1g.5gb"]["total"] == 7
    # Memory slice 0 is taken: the other six 1g.5gb partitions still fit.
    assert summary["1g.5gb"]["allocatable"] == 6
    # 2g.10gb at slices 0-1 overlaps the allocated partition; those at 2-3 and 4-5 fit.
    assert summary["2g.10gb"] == {
        "attribute": f"{NVIDIA}/profile",
        "type": "2g.10gb",
        "total": 3,
        "allocatable": 2,
    }
    assert summary["full"]["allocatable"] == 0
    # The blocked partitions are unavailable, as the pool page colours them.
    assert pool["allocatedDevices"] == 1
    assert pool["unavailableDevices"] == 2  # 2g.10gb at 0-1 and the full GPU
    assert pool["availableDevices"] == 11 - 1 - 2


def test_default_partition_type_attribute(api, cluster, mig_pool) -> None:
    """The request's default groups pools whose slice names no attribute; a slice's own wins."""
    assert "partitionSummary" not in _pools(api.get(URL, {"pool": "node-a-mig"}))["node-a-mig"]
    f.create(
        f.slice_object(
            "plain-mig",
            driver=NVIDIA,
            pool="plain",
            node="node-gpu-1",
            devices=[_mig_device(1, "1g.5gb", i, 1, "5Gi") for i in range(3)],
            # Room for two 14-SM partitions.
            counters={"gpu-1-counter-set": {"multiprocessors": "28"}},
        )
    )
    pools = _pools(
        api.get(URL, {"driver": NVIDIA, "defaultPartitionTypeAttribute": f"{NVIDIA}/type"})
    )
    assert pools["plain"]["partitionSummary"] == [
        {"attribute": f"{NVIDIA}/type", "type": "mig", "total": 3, "allocatable": 2}
    ]
    own = {entry["attribute"] for entry in pools["node-gpu-1"]["partitionSummary"]}
    assert own == {f"{NVIDIA}/profile"}
