"""Class membership follows slice changes incrementally: CEL runs again only over the devices of
the slices written since, and the result equals a computation from scratch."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from claims.devices.classes import ClassMembership, class_membership, forget_membership
from inventory.sync import apply_events, upsert_events
from tests.console.demo import load_demo

JSON = dict[str, Any]
GPU = "gpu.example.com"


@pytest.fixture(autouse=True)
def fresh_membership() -> Iterator[None]:
    forget_membership()
    yield
    forget_membership()


def _same(incremental: ClassMembership, scratch: ClassMembership) -> None:
    assert incremental.members == scratch.members
    assert incremental.cel_errors == scratch.cel_errors
    assert incremental.errors.keys() == scratch.errors.keys()
    assert incremental.keys == scratch.keys
    assert incremental.multiple == scratch.multiple


def _rewrite(piece: JSON, index: int) -> JSON:
    piece = copy.deepcopy(piece)
    piece["metadata"]["resourceVersion"] = str(10_000_000 + index)
    return piece


def _devices(piece: JSON) -> int:
    return len(piece["spec"].get("devices") or [])


@pytest.mark.django_db
def test_a_slice_change_evaluates_only_its_devices() -> None:
    """A GPU that changes model leaves gpu-h100, a removed slice's devices leave every class,
    a new slice's join: as from scratch, with CEL over the changed slices' devices alone."""
    objects = load_demo(nodes=20, seed=1)
    first = class_membership()
    # At most every distinct expression once per device.
    selectors = len(
        {s["cel"]["expression"] for c in objects["DeviceClass"] for s in c["spec"]["selectors"]}
    )
    gpus = [s for s in objects["ResourceSlice"] if s["spec"]["driver"] == GPU and _devices(s)]
    changed, removed, template = gpus[0], gpus[1], gpus[2]
    changed = _rewrite(changed, 1)
    gpu = changed["spec"]["devices"][0]
    gpu["attributes"]["model"] = {"string": "a100"}
    added = _rewrite(template, 2)
    added["metadata"].update(name="extra-gpus", uid="uid-extra-gpus")
    added["spec"]["nodeName"] = "node-extra"
    added["spec"]["pool"] = {**added["spec"]["pool"], "name": "node-extra"}
    upsert_events("ResourceSlice", [(changed, None), (added, None)], publish=False)
    apply_events("ResourceSlice", [("DELETED", removed)], publish=False)

    incremental = class_membership()
    assert incremental.fingerprint != first.fingerprint
    assert 0 < incremental.evaluations <= selectors * (_devices(changed) + _devices(added))
    assert incremental.evaluations < first.evaluations / 5
    moved = incremental.keys[(GPU, changed["spec"]["pool"]["name"], gpu["name"])]
    assert moved in first.members["gpu-h100"] and moved not in incremental.members["gpu-h100"]
    assert moved in incremental.members[GPU]
    forget_membership()
    _same(incremental, class_membership())


@pytest.mark.django_db
def test_a_class_change_evaluates_every_device_again() -> None:
    """A DeviceClass written again (selectors may differ) means no outcome is kept."""
    objects = load_demo(nodes=10, seed=1)
    first = class_membership()
    device_class = copy.deepcopy(objects["DeviceClass"][0])
    device_class["metadata"]["resourceVersion"] = "99999999"
    device_class["spec"]["selectors"] = [{"cel": {"expression": 'device.driver == "none"'}}]
    upsert_events("DeviceClass", [(device_class, None)], publish=False)
    again = class_membership()
    assert again.evaluations >= first.evaluations - len(first.keys)
    assert again.members[device_class["metadata"]["name"]] == frozenset()
    forget_membership()
    _same(again, class_membership())


@pytest.mark.django_db
def test_warm_units_leaves_the_first_page_two_queries(api, django_assert_max_num_queries) -> None:
    """What a web process computes at start (console.serve) is what the availability API then
    reads: the membership's and the holds' fingerprints, nothing read or evaluated again."""
    from claims.devices.availability import forget_units, warm_units

    load_demo(nodes=5, seed=1)
    forget_units()
    warm_units()
    warmed = class_membership()
    with django_assert_max_num_queries(2):
        assert api.get("/api/inventory/availability/").status_code == 200
    assert class_membership() is warmed
    forget_units()


@pytest.mark.django_db
def test_kept_holds_follow_claims_and_taint_rules() -> None:
    """The holds are kept between pages, and a claim released or a taint rule added is seen at
    once."""
    from claims.devices.classes import held_and_tainted

    objects = load_demo(nodes=5, seed=1)
    membership = class_membership()
    held, _, tainted = held_and_tainted(membership)
    allocated = next(
        c for c in objects["ResourceClaim"] if (c.get("status") or {}).get("allocation")
    )
    result = allocated["status"]["allocation"]["devices"]["results"][0]
    key = (result["driver"], result["pool"], result["device"])
    assert membership.keys[key] in held
    released = copy.deepcopy(allocated)
    released["metadata"]["resourceVersion"] = "99999999"
    released["status"] = {}
    upsert_events("ResourceClaim", [(released, None)], publish=False)
    assert membership.keys[key] not in held_and_tainted(class_membership())[0]
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain", "uid": "uid-drain"},
        "spec": {
            "deviceSelector": {"driver": key[0], "pool": key[1], "device": key[2]},
            "taint": {"key": "example.com/drain", "effect": "NoSchedule"},
        },
    }
    upsert_events("DeviceTaintRule", [(rule, None)], publish=False)
    assert membership.keys[key] not in tainted
    assert membership.keys[key] in held_and_tainted(class_membership())[2]
