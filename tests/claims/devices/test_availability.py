"""Physical units per DeviceClass (claims.devices.availability) on small clusters whose answer
is known by construction: a MIG GPU counts once, partitions per profile, free per class."""

from __future__ import annotations

from typing import Any

import pytest

from claims.devices.availability import (
    AvailabilityScope,
    class_availability,
    class_unit_counts,
    counter_set_units,
    unit_counts,
)
from inventory.models import Pool
from tests import factories as f
from tests.claims.devices.kept import fresh  # noqa: F401 (autouse: nothing kept across tests)

GPU = "gpu.example.com"
NIC = "nic.example.com"
WHOLE = {"memory": "80Gi", "slices": "7"}
SLICE_1G = {"memory": "10Gi", "slices": "1"}
SLICE_3G = {"memory": "40Gi", "slices": "3"}


def attrs(**values: str) -> dict[str, Any]:
    return {key: {"string": value} for key, value in values.items()}


def mig_gpu(index: int, *, model: str = "h100") -> list[dict[str, Any]]:
    """A partitionable GPU: the whole device, three 1g.10gb slices and one 3g.40gb slice."""
    counters = f"gpu-{index}-counters"
    devices = [
        f.device_entry(
            f"gpu-{index}",
            attributes=attrs(type="gpu", model=model),
            consumes={counters: WHOLE},
        )
    ]
    devices += [
        f.device_entry(
            f"gpu-{index}-mig-1g-{slot}",
            attributes=attrs(type="mig", model=model, profile="1g.10gb"),
            consumes={counters: SLICE_1G},
        )
        for slot in range(3)
    ]
    devices.append(
        f.device_entry(
            f"gpu-{index}-mig-3g",
            attributes=attrs(type="mig", model=model, profile="3g.40gb"),
            consumes={counters: SLICE_3G},
        )
    )
    return devices


def classes() -> list[dict[str, Any]]:
    selector = f'device.attributes["{GPU}"]'
    return [
        f.device_class_object("gpu", expression=f'{selector}.type == "gpu"'),
        f.device_class_object(
            "gpu-h100", expression=f'{selector}.type == "gpu" && {selector}.model == "h100"'
        ),
        f.device_class_object(
            "mig-1g", expression=f'{selector}.type == "mig" && {selector}.profile == "1g.10gb"'
        ),
        f.device_class_object("mig", expression=f'{selector}.type == "mig"'),
        f.device_class_object("nic", expression=f'device.driver == "{NIC}"'),
    ]


def held(name: str, *, pool: str, device: str, driver: str = GPU) -> dict[str, Any]:
    return f.claim_object(
        name, results=[f.allocation_result("req", driver=driver, pool=pool, device=device)]
    )


@pytest.fixture
def cluster(db) -> None:
    """The cluster of `build_cluster`."""
    build_cluster()


def build_cluster() -> None:
    """node-a: two MIG GPUs (gpu-0 with one 1g slice held) and a plain H100; node-b: two
    plain A100s and a NIC."""
    f.create(
        f.node_object("node-a"),
        f.node_object("node-b"),
        *classes(),
        f.slice_object(
            "node-a-gpu",
            driver=GPU,
            pool="node-a",
            node="node-a",
            devices=[
                *mig_gpu(0),
                *mig_gpu(1),
                f.device_entry("gpu-2", attributes=attrs(type="gpu", model="h100")),
            ],
            counters={"gpu-0-counters": WHOLE, "gpu-1-counters": WHOLE},
        ),
        f.slice_object(
            "node-b-gpu",
            driver=GPU,
            pool="node-b",
            node="node-b",
            devices=[
                f.device_entry(f"gpu-{i}", attributes=attrs(type="gpu", model="a100"))
                for i in range(2)
            ],
        ),
        f.slice_object(
            "node-b-nic",
            driver=NIC,
            pool="node-b-nic",
            node="node-b",
            devices=[f.device_entry("nic-0")],
        ),
        held("mig-user", pool="node-a", device="gpu-0-mig-1g-0"),
    )


def by_class(scope: AvailabilityScope | None = None) -> dict[str, dict[str, Any]]:
    return {entry["deviceClass"]: entry for entry in class_availability(scope)}


def test_a_partitioned_gpu_is_one_unit_and_its_slices_are_counted_apart(cluster) -> None:
    """Per class: a MIG GPU is one unit (taken once a slice is held), whole devices are not
    partitions, and free slices are counted per profile with the units they are on."""
    found = by_class()
    assert found["gpu-h100"]["physical"] == {"total": 3, "free": 2}
    # gpu-0 is blocked by its held slice: the counters left cannot hold the whole GPU.
    assert found["gpu-h100"]["devices"] == {"total": 3, "free": 2}
    assert found["gpu-h100"]["partitions"] == []
    assert found["gpu"]["physical"] == {"total": 5, "free": 4}
    assert found["mig-1g"]["physical"] == {"total": 2, "free": 1}
    assert found["mig-1g"]["devices"] == {"total": 6, "free": 5}
    assert found["mig-1g"]["partitions"] == [
        {"profile": "1g.10gb", "total": 6, "free": 5, "parents": 2, "parentsWithFree": 2}
    ]
    assert found["mig"]["physical"] == {"total": 2, "free": 1}
    assert found["mig"]["partitions"] == [
        {"profile": "1g.10gb", "total": 6, "free": 5, "parents": 2, "parentsWithFree": 2},
        {"profile": "3g.40gb", "total": 2, "free": 2, "parents": 2, "parentsWithFree": 2},
    ]
    assert found["nic"]["physical"] == {"total": 1, "free": 1}


def test_slices_that_use_up_the_counters_block_the_rest(db, cluster) -> None:
    """With 7 of 7 slices of gpu-1 held, no partition of it is free and the unit is taken."""
    f.create(
        held("big", pool="node-a", device="gpu-1-mig-3g"),
        *(held(f"small-{slot}", pool="node-a", device=f"gpu-1-mig-1g-{slot}") for slot in range(3)),
    )
    found = by_class()
    assert found["mig"]["physical"] == {"total": 2, "free": 0}
    # gpu-0 still has 70Gi and 6 slices: two 1g and its 3g are free; gpu-1 has 10Gi and 1 slice.
    assert found["mig"]["partitions"] == [
        {"profile": "1g.10gb", "total": 6, "free": 2, "parents": 2, "parentsWithFree": 1},
        {"profile": "3g.40gb", "total": 2, "free": 1, "parents": 2, "parentsWithFree": 1},
    ]


def test_a_taint_keeps_a_unit_from_the_classes_whose_devices_it_taints(db, cluster) -> None:
    """A rule tainting gpu-1's whole device takes gpu-1 from gpu-h100, not from the MIG class,
    whose slices on it are untainted."""
    f.create(f.taint_rule_object("maintenance", driver=GPU, pool="node-a", device="gpu-1"))
    found = by_class()
    assert found["gpu-h100"]["physical"] == {"total": 3, "free": 1}
    assert found["mig-1g"]["physical"] == {"total": 2, "free": 1}
    assert found["mig-1g"]["partitions"][0]["free"] == 5


def test_effect_none_taints_keep_nothing_away(db, cluster) -> None:
    """A taint with effect None is informational: the unit stays free."""
    f.create(f.taint_rule_object("note", driver=GPU, pool="node-a", device="gpu-2", effect="None"))
    assert by_class()["gpu-h100"]["physical"] == {"total": 3, "free": 2}


def test_admin_access_takes_nothing(db, cluster) -> None:
    """A device held only with admin access stays free, as in the device counts."""
    claim = f.claim_object(
        "watch",
        results=[
            f.allocation_result("req", driver=GPU, pool="node-b", device="gpu-0", admin_access=True)
        ],
    )
    f.create(claim)
    assert by_class()["gpu"]["physical"] == {"total": 5, "free": 4}


def test_scopes_narrow_the_units(cluster) -> None:
    """node, pool (driver/pool) and driver narrow what is counted; given together, all hold."""
    node_a = by_class(AvailabilityScope(node="node-a"))
    assert node_a["gpu"]["physical"] == {"total": 3, "free": 2}
    assert node_a["nic"]["physical"] == {"total": 0, "free": 0}
    assert node_a["mig"]["devices"] == {"total": 8, "free": 7}
    node_b = by_class(AvailabilityScope(pool=f"{GPU}/node-b"))
    assert node_b["gpu"]["physical"] == {"total": 2, "free": 2}
    assert node_b["mig"]["partitions"] == []
    nics = by_class(AvailabilityScope(driver=NIC))
    assert nics["nic"]["physical"] == {"total": 1, "free": 1}
    assert nics["gpu"]["physical"] == {"total": 0, "free": 0}
    none = by_class(AvailabilityScope(node="node-a", driver=NIC))
    assert none["nic"]["physical"] == {"total": 0, "free": 0}


def test_unit_counts_per_node_and_pool(cluster) -> None:
    """Per node (local units) and per pool id, of a class or of every unit."""
    assert unit_counts("node", device_class="gpu-h100") == {"node-a": {"total": 3, "free": 2}}
    pools = {p.name: p.pk for p in Pool.objects.all()}
    every = unit_counts("pool")
    assert every[pools["node-a"]] == {"total": 3, "free": 2}
    assert every[pools["node-b-nic"]] == {"total": 1, "free": 1}
    per_class = class_unit_counts("node", keys=["node-b"])
    assert per_class["gpu"] == {"node-b": {"total": 2, "free": 2}}
    assert per_class["mig"] == {}
    with pytest.raises(LookupError, match="nope"):
        unit_counts("node", device_class="nope")


def test_profiles_fall_back_to_what_a_partition_takes(db) -> None:
    """Without a profile attribute, partitions of the same shape on different GPUs are one
    profile named by what they take; the slice's partitionTypeAttribute wins when set."""
    devices = []
    for index in range(2):
        counters = f"gpu-{index}-counters"
        devices.append(f.device_entry(f"gpu-{index}", consumes={counters: WHOLE}))
        devices.append(
            f.device_entry(
                f"gpu-{index}-half",
                attributes=attrs(shape="half"),
                consumes={counters: {"memory": "40Gi", "slices": "3"}},
            )
        )
    typed = f.slice_object(
        "typed",
        driver="typed.example.com",
        pool="typed",
        node="node-a",
        devices=[
            f.device_entry(
                "part", attributes=attrs(shape="half"), consumes={"c": {"memory": "1Gi"}}
            )
        ],
        counters={"c": {"memory": "2Gi"}},
    )
    typed["spec"]["partitionTypeAttribute"] = "typed.example.com/shape"
    f.create(
        f.node_object("node-a"),
        f.device_class_object("any", expression="true"),
        f.slice_object(
            "plain",
            driver=GPU,
            pool="plain",
            node="node-a",
            devices=devices,
            counters={"gpu-0-counters": WHOLE, "gpu-1-counters": WHOLE},
        ),
        typed,
    )
    entry = by_class()["any"]
    assert entry["physical"] == {"total": 3, "free": 3}
    assert [(p["profile"], p["total"], p["parents"]) for p in entry["partitions"]] == [
        ("half", 1, 1),
        ("memory=40Gi slices=3", 2, 2),
    ]


def test_counter_sets_one_device_draws_on_together_are_one_unit(db) -> None:
    """A device consuming from two sets joins them: one unit, named by both."""
    assert counter_set_units([["a", "b"], ["a"], ["c"]]) == {"a": "a+b", "b": "a+b", "c": "c"}
    f.create(
        f.node_object("node-a"),
        f.device_class_object("any", expression="true"),
        f.slice_object(
            "joined",
            driver=GPU,
            pool="joined",
            node="node-a",
            devices=[
                f.device_entry("both", consumes={"a": {"x": "1"}, "b": {"x": "1"}}),
                f.device_entry("left", consumes={"a": {"x": "1"}}),
                f.device_entry("right", consumes={"b": {"x": "1"}}),
                f.device_entry("alone", consumes={"c": {"x": "1"}}),
                f.device_entry("too-big", consumes={"d": {"x": "5"}}),
            ],
            counters={"a": {"x": "2"}, "b": {"x": "2"}, "c": {"x": "2"}, "d": {"x": "2"}},
        ),
        held("user", pool="joined", device="right"),
    )
    entry = by_class()["any"]
    # a+b is taken (right is held); c is free; d's only device never fits its counters.
    assert entry["physical"] == {"total": 3, "free": 1}
    assert entry["devices"] == {"total": 5, "free": 3}
