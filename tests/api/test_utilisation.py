"""Utilisation numbers against the hand-built cluster, whose answers are known by construction."""

from __future__ import annotations

from claims.devices.classes import class_utilisation
from claims.devices.counts import driver_utilisation, pool_device_counts, pool_utilisation
from claims.devices.states import annotate_device_state, refine_device_states
from claims.devices.usage import capacity_usage, capacity_usages, counter_usage
from inventory.models import Device, Pool
from tests import factories as f
from tests.api.conftest import not_ready_claim, results

GPU = "gpu.example.com"


def _pool(name: str) -> Pool:
    return Pool.objects.get(name=name)


def test_device_states(cluster) -> None:
    """Each device of the fixture has the state its allocations and taints give it."""
    states = dict(
        annotate_device_state(Device.objects.all())
        .values_list("name", "state")
        .filter(pool_name__in=["node-a", "node-a-net"])
    )
    assert states == {
        "gpu-0": "allocated",
        "gpu-1": "allocated",
        "gpu-2": "tainted",
        "gpu-3": "tainted",
        "gpu-4": "free",
        "nic-0": "shared",
    }
    node_b = dict(
        annotate_device_state(Device.objects.filter(pool_name="node-b")).values_list(
            "name", "state"
        )
    )
    assert node_b == {"gpu-0": "admin", "gpu-1": "free"}


def test_device_flags(cluster) -> None:
    """The boolean columns say why: admin access, rule taints and sharing are kept apart."""
    rows = {
        d.key: d
        for d in annotate_device_state(Device.objects.filter(driver__in=["gpu.example.com"]))
    }
    monitored = rows["gpu.example.com/node-b/gpu-0"]
    assert monitored.admin_access and not monitored.allocated and not monitored.is_tainted
    ruled = rows["gpu.example.com/node-a/gpu-2"]
    assert ruled.is_tainted and not ruled.tainted  # tainted by a DeviceTaintRule only


def test_taint_rule_with_effect_none_does_not_taint(cluster) -> None:
    """A DeviceTaintRule with effect None is informational and leaves devices free."""
    f.create(f.taint_rule_object("note", driver="gpu.example.com", pool="node-b", effect="None"))
    state = annotate_device_state(Device.objects.filter(pool_name="node-b", name="gpu-1"))
    assert state.get().state == "free"


def test_pool_utilisation(cluster) -> None:
    """Per pool: total, allocated, shared, admin, tainted and free device counts."""
    rows = {
        p.name: (
            p.devices_total,
            p.devices_allocated,
            p.devices_shared,
            p.devices_admin,
            p.devices_tainted,
            p.devices_free,
        )
        for p in pool_utilisation(Pool.objects.all())
    }
    assert rows == {
        "node-a": (5, 2, 0, 0, 2, 1),
        "node-b": (2, 0, 0, 1, 0, 2),
        "node-a-mig": (3, 2, 0, 0, 0, 1),
        "node-a-net": (1, 1, 1, 0, 0, 0),
    }


def test_pool_utilisation_counts_only_the_current_generation(cluster) -> None:
    """After a new generation of a pool's slice, devices of the old generation are not counted."""
    old = cluster[("ResourceSlice", "node-a-gpu")]
    newer = f.slice_object(
        "node-a-gpu-gen2",
        driver="gpu.example.com",
        pool="node-a",
        node="node-a",
        generation=2,
        devices=[f.device_entry("gpu-0"), f.device_entry("gpu-9")],
    )
    f.create(newer)
    assert old["spec"]["pool"]["generation"] == 1
    pool = pool_utilisation(Pool.objects.filter(name="node-a")).get()
    assert (pool.devices_total, pool.devices_allocated, pool.devices_free) == (2, 1, 1)


def test_class_utilisation(cluster) -> None:
    """A driver-selector class counts its driver's devices; a CEL class counts its matches."""
    report = class_utilisation()
    by_name = {entry["name"]: entry for entry in report["classes"]}
    assert by_name["gpu.example.com"]["driver"] == "gpu.example.com"
    assert by_name["gpu.example.com"]["devices"] == {
        "total": 7,
        "allocated": 2,
        "shared": 0,
        "admin": 1,
        "tainted": 2,
        "free": 3,
    }
    assert by_name["h100-only"]["driver"] is None
    # By construction: node-a's five GPUs are h100 (gpu-0/1 held, gpu-2/3 tainted, gpu-4 free).
    assert by_name["h100-only"]["devices"] == {
        "total": 5,
        "allocated": 2,
        "shared": 0,
        "admin": 0,
        "tainted": 2,
        "free": 1,
    }
    assert "approximate" in report["method"] or "CEL" in report["method"]


def test_counter_usage(cluster) -> None:
    """Two allocated 1g partitions consume 20Gi and 2 slices of the 80Gi / 7 counter set."""
    usage = {(u["counter_set"], u["counter"]): u for u in counter_usage(_pool("node-a-mig"))}
    memory = usage[("gpu-0-counters", "memory")]
    assert (memory["capacity"], memory["consumed"], memory["available"]) == ("80Gi", "20Gi", "60Gi")
    slices = usage[("gpu-0-counters", "slices")]
    assert (slices["capacity"], slices["consumed"], slices["available"]) == ("7", "2", "5")


def test_capacity_usage_of_a_shared_device(cluster) -> None:
    """Two shares consuming 10G and 30G leave 60G of a 100G device."""
    nic = Device.objects.get(name="nic-0")
    (usage,) = capacity_usage(nic)
    assert usage == {
        "capacity": "bandwidth",
        "value": "100G",
        "consumed": "40G",
        "available": "60G",
        "allocations": 2,
    }


def test_capacity_usage_of_an_exclusive_device(cluster) -> None:
    """An exclusively allocated device has all of its capacity consumed; a free one none."""
    taken = Device.objects.get(pool_name="node-a", name="gpu-0")
    free = Device.objects.get(pool_name="node-a", name="gpu-4")
    assert capacity_usage(taken)[0]["available"] == "0"
    assert capacity_usage(free)[0]["consumed"] == "0"


def test_pool_utilisation_endpoint(api, cluster) -> None:
    """/pools/{id}/utilisation/ gives the pool's counts and its counters."""
    pool = _pool("node-a-mig")
    body = api.get(f"/api/inventory/pools/{pool.pk}/utilisation/").json()
    assert (body["devices_total"], body["devices_allocated"], body["devices_free"]) == (3, 2, 1)
    assert {c["counter"]: c["available"] for c in body["counters"]} == {
        "memory": "60Gi",
        "slices": "5",
    }


def test_pools_utilisation_endpoint(api, cluster) -> None:
    """/utilisation/pools/ lists every pool's counts and filters like the pool list."""
    rows = results(api.get("/api/inventory/utilisation/pools/", {"driver": "gpu.example.com"}))
    assert {r["name"]: r["devices_tainted"] for r in rows} == {"node-a": 2, "node-b": 0}


def test_classes_utilisation_endpoint(api, cluster) -> None:
    """/utilisation/classes/ says how it counts and gives exact counts per class."""
    body = api.get("/api/inventory/utilisation/classes/").json()
    assert body["method"]
    assert {c["name"]: (c["approximate"], c["method"]) for c in body["classes"]} == {
        "gpu.example.com": (False, "cel"),
        "h100-only": (False, "cel"),
    }


def test_device_detail_has_capacity_usage(api, cluster) -> None:
    """A device's detail includes its consumable capacity usage."""
    nic = Device.objects.get(name="nic-0")
    body = api.get(f"/api/inventory/devices/{nic.pk}/").json()
    assert body["state"] == "shared"
    assert body["capacity_usage"][0]["available"] == "60G"
    assert body["spec"]["allowMultipleAllocations"] is True


def _refined(**lookup: str) -> dict[str, Device]:
    devices = list(annotate_device_state(Device.objects.filter(current=True, **lookup)))
    refine_device_states(devices)
    return {device.name: device for device in devices}


def test_partition_whose_counters_are_used_up_is_blocked(cluster) -> None:
    """mig-7g needs all 80Gi and 7 slices; two held 1g partitions leave 60Gi and 5: blocked."""
    devices = _refined(pool_name="node-a-mig")
    assert devices["mig-7g"].state == "free"  # the SQL state: nothing holds it
    assert devices["mig-7g"].blocked and devices["mig-7g"].effective_state == "blocked"
    assert {devices["mig-1g-0"].effective_state, devices["mig-1g-1"].effective_state} == {
        "allocated"
    }


def test_partition_is_not_blocked_when_the_counters_cover_it(cluster) -> None:
    """With no partition held, the counters cover every partition: nothing is blocked."""
    from claims.models import ResourceClaim

    ResourceClaim.objects.filter(name__in=["mig-a", "mig-b"]).delete()
    devices = _refined(pool_name="node-a-mig")
    assert {d.effective_state for d in devices.values()} == {"free"}


def test_pool_device_counts_report_blocked_and_keep_free(cluster) -> None:
    """Blocked devices are a part of free (nothing holds them), so free keeps its meaning."""
    counts = pool_device_counts()[("mig.example.com", "node-a-mig")]
    assert (counts["total"], counts["allocated"], counts["blocked"], counts["free"]) == (3, 2, 1, 1)
    assert driver_utilisation()["mig.example.com"]["blocked"] == 1


def test_no_execute_taint_rule_makes_a_device_unhealthy(cluster) -> None:
    """A DeviceTaintRule with effect NoExecute marks the device unhealthy, in states and counts."""
    f.create(
        f.taint_rule_object("ecc", driver=GPU, pool="node-b", device="gpu-1", effect="NoExecute")
    )
    devices = _refined(pool_name="node-b")
    assert devices["gpu-1"].unhealthy and devices["gpu-1"].effective_state == "unhealthy"
    assert not devices["gpu-0"].unhealthy
    counts = pool_device_counts()[(GPU, "node-b")]
    assert (counts["unhealthy"], counts["tainted"]) == (1, 1)


def test_ready_false_device_condition_makes_a_device_unhealthy(cluster) -> None:
    """status.devices[].conditions with Ready=False in a claim marks its device unhealthy."""
    f.create(not_ready_claim("broken", pool="node-a", device="gpu-4"))
    devices = _refined(pool_name="node-a")
    assert devices["gpu-4"].effective_state == "unhealthy"
    assert devices["gpu-4"].state == "allocated"
    assert [d.name for d in devices.values() if d.unhealthy] == ["gpu-4"]
    assert pool_device_counts()[(GPU, "node-a")]["unhealthy"] == 1


def test_pool_device_counts_agree_with_pool_utilisation(cluster) -> None:
    """The grouped counts and the per-pool SQL annotations give the same numbers."""
    counts = pool_device_counts()
    for pool in pool_utilisation(Pool.objects.all()):
        mine = counts[(pool.driver, pool.name)]
        theirs = (
            pool.devices_total,
            pool.devices_allocated,
            pool.devices_shared,
            pool.devices_admin,
            pool.devices_tainted,
            pool.devices_free,
        )
        keys = ("total", "allocated", "shared", "admin", "tainted", "free")
        assert tuple(mine[key] for key in keys) == theirs, pool.name


def test_device_detail_api_has_the_effective_state(api, cluster) -> None:
    """The device detail endpoint reports blocked for mig-7g next to its SQL state."""
    device = Device.objects.get(pool_name="node-a-mig", name="mig-7g")
    body = api.get(f"/api/inventory/devices/{device.pk}/").json()
    assert (body["state"], body["effective_state"], body["blocked"]) == ("free", "blocked", True)


def test_capacity_usages_match_capacity_usage(cluster) -> None:
    """The batched capacity usage equals the per-device one for every device."""
    devices = list(Device.objects.all())
    batched = capacity_usages(devices)
    assert {d.pk: capacity_usage(d) for d in devices} == batched
