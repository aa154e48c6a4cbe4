"""The class membership's outcomes stored in the database: a new process evaluates CEL only over
the devices of slices written since they were stored, and its first membership equals one
computed from scratch whatever was written while no process ran."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest

from claims.devices import classes
from claims.devices.classes import (
    ClassMembership,
    class_membership,
    forget_membership,
    forget_membership_everywhere,
)
from claims.models import KeptMembership
from inventory.sync import apply_events, upsert_events
from tests.console.demo import load_demo

JSON = dict[str, Any]
GPU = "gpu.example.com"


@pytest.fixture(autouse=True)
def fresh_membership(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # These clusters have a few hundred devices: stored whatever their number.
    monkeypatch.setattr(classes, "_STORE_MIN", 1)
    forget_membership()
    yield
    forget_membership()


def _same(restarted: ClassMembership, scratch: ClassMembership) -> None:
    assert restarted.members == scratch.members
    assert restarted.cel_errors == scratch.cel_errors
    assert restarted.errors == scratch.errors
    assert restarted.keys == scratch.keys
    assert restarted.multiple == scratch.multiple
    assert restarted.outcomes == scratch.outcomes


def _from_scratch() -> ClassMembership:
    """The membership computed with nothing kept or stored, leaving the stored row as it was
    (what the next restart starts from)."""
    row = KeptMembership.objects.values("classes", "stored_at", "devices", "data").first()
    forget_membership_everywhere()
    try:
        return class_membership()
    finally:
        forget_membership()
        KeptMembership.objects.all().delete()
        if row is not None:
            KeptMembership.objects.create(name="class-membership", **row)


def _devices(piece: JSON) -> int:
    return len(piece["spec"].get("devices") or [])


class _Cluster:
    """The demo cluster's slices and classes as last written, and random writes to them."""

    def __init__(self, objects: dict[str, list[JSON]], rng: random.Random) -> None:
        self.rng = rng
        self.version = 70_000_000
        self.slices = {s["metadata"]["name"]: s for s in objects["ResourceSlice"]}
        self.classes = objects["DeviceClass"]
        self.original = {c["metadata"]["name"]: c["spec"]["selectors"] for c in self.classes}
        self.removed: list[JSON] = []
        self.serial = 0
        self.written: set[str] = set()
        self.classes_changed = False

    def _stamp(self, obj: JSON) -> JSON:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    def _write(self, piece: JSON) -> None:
        self.slices[piece["metadata"]["name"]] = piece
        self.written.add(piece["metadata"]["name"])
        upsert_events("ResourceSlice", [(copy.deepcopy(piece), None)], publish=False)

    def change(self) -> str:
        kind = self.rng.choice(
            ["attribute", "attribute", "touch", "delete", "restore", "add", "generation", "class"]
        )
        names = sorted(self.slices)
        if kind == "attribute":
            gpus = [
                n
                for n in names
                if self.slices[n]["spec"]["driver"] == GPU and _devices(self.slices[n])
            ]
            piece = self._stamp(copy.deepcopy(self.slices[self.rng.choice(gpus)]))
            device = self.rng.choice(piece["spec"]["devices"])
            model = self.rng.choice(["h100", "a100", "l4"])
            device.setdefault("attributes", {})["model"] = {"string": model}
            self._write(piece)
        elif kind == "touch":
            self._write(self._stamp(copy.deepcopy(self.slices[self.rng.choice(names)])))
        elif kind == "delete":
            piece = self.slices.pop(self.rng.choice(names))
            self.removed.append(piece)
            apply_events(
                "ResourceSlice", [("DELETED", self._stamp(copy.deepcopy(piece)))], publish=False
            )
        elif kind == "restore" and self.removed:
            self._write(self._stamp(self.removed.pop(self.rng.randrange(len(self.removed)))))
        elif kind in ("add", "generation"):
            self.serial += 1
            template = self.slices[self.rng.choice([n for n in names if _devices(self.slices[n])])]
            piece = self._stamp(copy.deepcopy(template))
            name = f"stored-test-{self.serial}"
            piece["metadata"].update(name=name, uid=f"uid-{name}")
            pool = piece["spec"]["pool"]
            if kind == "generation":
                # The pool's next generation: its other slices' devices stop being current.
                pool["generation"] = int(pool.get("generation") or 0) + 1
                pool["resourceSliceCount"] = 1
            else:
                piece["spec"]["nodeName"] = f"node-{name}"
                pool["name"] = f"node-{name}"
            self._write(piece)
        elif kind == "class":
            self.classes_changed = True
            device_class = self._stamp(copy.deepcopy(self.rng.choice(self.classes)))
            other = self.rng.choice(self.classes)
            device_class["spec"]["selectors"] = copy.deepcopy(
                self.rng.choice(
                    [
                        self.original[other["metadata"]["name"]],
                        self.original[device_class["metadata"]["name"]],
                    ]
                )
            )
            upsert_events("DeviceClass", [(device_class, None)], publish=False)
        return kind

    def devices_written(self) -> int:
        """Devices of the slices written since `written` was last cleared."""
        return sum(_devices(self.slices[n]) for n in self.written if n in self.slices)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2])
def test_a_restart_after_random_changes_equals_scratch(seed: int) -> None:
    """Rounds of random slice and class writes, each made while no process runs: the restarted
    process's first membership equals one from scratch, and it evaluates CEL only over the
    devices of slices written since the outcomes were stored (none when nothing was)."""
    objects = load_demo(nodes=8, seed=seed)
    rng = random.Random(seed)
    cluster = _Cluster(objects, rng)
    expressions = {
        s["cel"]["expression"] for c in objects["DeviceClass"] for s in c["spec"]["selectors"]
    }
    forget_membership_everywhere()
    first = class_membership()
    assert first.evaluations > 0
    assert KeptMembership.objects.get().devices == len(first.keys)
    kinds: set[str] = set()
    for round_ in range(10):
        stamp = KeptMembership.objects.get().stored_at
        changes = 0 if round_ == 0 else rng.randint(1, 4)
        kinds.update(cluster.change() for _ in range(changes))
        forget_membership()  # a new process
        restarted = class_membership()
        if not cluster.classes_changed:
            bound = len(expressions) * cluster.devices_written()
            assert restarted.evaluations <= bound, (round_, restarted.evaluations, bound)
        if round_ == 0:
            assert restarted.evaluations == 0
        _same(restarted, _from_scratch())
        if KeptMembership.objects.get().stored_at != stamp:
            cluster.written.clear()
            cluster.classes_changed = False
    # The sequence wrote every kind of change the test knows.
    assert {"attribute", "delete", "add", "generation", "class"} <= kinds


@pytest.mark.django_db
def test_outcomes_stored_under_other_selectors_are_not_used() -> None:
    """A class's selectors changed while no process ran: every device is evaluated again."""
    objects = load_demo(nodes=5, seed=1)
    forget_membership_everywhere()
    first = class_membership()
    device_class = copy.deepcopy(objects["DeviceClass"][0])
    device_class["metadata"]["resourceVersion"] = "99999999"
    device_class["spec"]["selectors"] = [{"cel": {"expression": 'device.driver == "none"'}}]
    upsert_events("DeviceClass", [(device_class, None)], publish=False)
    forget_membership()
    restarted = class_membership()
    assert restarted.evaluations >= first.evaluations - len(first.keys)
    assert restarted.members[device_class["metadata"]["name"]] == frozenset()
    _same(restarted, _from_scratch())


@pytest.mark.django_db
def test_an_unreadable_row_means_evaluating_everything() -> None:
    """Stored data that does not decode is ignored (logged), never trusted."""
    load_demo(nodes=5, seed=1)
    forget_membership_everywhere()
    first = class_membership()
    KeptMembership.objects.update(data=b"not zlib")
    forget_membership()
    again = class_membership()
    assert again.evaluations == first.evaluations
    _same(again, first)


@pytest.mark.django_db
def test_few_changes_leave_the_row_as_stored() -> None:
    """The outcomes are written again only once a twentieth of the devices was evaluated since
    (a slice change does not write a megabyte), and a restart reads them."""
    objects = load_demo(nodes=20, seed=1)
    forget_membership_everywhere()
    first = class_membership()
    row = KeptMembership.objects.get()
    piece = copy.deepcopy(min((s for s in objects["ResourceSlice"] if _devices(s)), key=_devices))
    piece["metadata"]["resourceVersion"] = "99999999"
    upsert_events("ResourceSlice", [(piece, None)], publish=False)
    changed = class_membership()
    assert 0 < changed.unstored * classes._STORE_SHARE < len(first.keys)
    assert KeptMembership.objects.get().stored_at == row.stored_at


@pytest.mark.django_db
def test_a_small_cluster_is_not_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the minimum, evaluating every device again costs less than a write: nothing is
    stored, and a page makes no write."""
    monkeypatch.setattr(classes, "_STORE_MIN", 2000)
    load_demo(nodes=5, seed=1)
    forget_membership_everywhere()
    first = class_membership()
    assert 0 < len(first.keys) < 2000
    assert not KeptMembership.objects.exists()


@pytest.mark.django_db
def test_outcomes_decided_by_other_code_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment whose CEL adapter or libraries differ evaluates every device again."""
    from claims.devices import stored

    load_demo(nodes=5, seed=1)
    forget_membership_everywhere()
    first = class_membership()
    forget_membership()
    assert class_membership().evaluations == 0
    monkeypatch.setattr(stored, "_code_digest", lambda: "another deployment")
    forget_membership()
    again = class_membership()
    assert again.evaluations == first.evaluations
    _same(again, first)
