"""The physical units stored in the database: a new process takes those an earlier one stored for
the very slices and classes it finds, reading no device, and builds them again after any slice or
class was written while no process ran; either way its first units equal a build from scratch."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from dataclasses import fields

import pytest

from claims.devices import classes, units
from claims.devices.classes import class_membership, forget_membership_everywhere
from claims.devices.units import UnitIndex, forget_stored_units, unit_index
from claims.models import KeptMembership
from dashboard.kept import Kept
from tests.claims.devices.test_stored_membership import _Cluster
from tests.console.demo import load_demo

_COMPARED = [f.name for f in fields(UnitIndex) if f.name != "devices_read"]


@pytest.fixture(autouse=True)
def nothing_stored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # These clusters have a few hundred devices: the membership's outcomes stored whatever their
    # number, as at 5,000 nodes.
    monkeypatch.setattr(classes, "_STORE_MIN", 1)
    monkeypatch.setattr(units, "_STORE_MIN", 1)
    Kept.forget_every()
    yield
    Kept.forget_every()


def _restart() -> UnitIndex:
    """The units a new process computes first."""
    Kept.forget_every()
    return unit_index()


def _same_as_scratch(index: UnitIndex) -> None:
    """`index` equals the units built from the database now, with nothing stored taken."""
    scratch = units._build(class_membership())
    assert scratch.devices_read > 0
    for name in _COMPARED:
        assert getattr(index, name) == getattr(scratch, name), name


def _stored_units() -> KeptMembership:
    return KeptMembership.objects.get(name="physical-units")


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restart_after_random_changes_equals_scratch(seed: int) -> None:
    """Rounds of random slice and class writes, each made while no process runs: the restarted
    process's first units equal a build from scratch; it reads no device when nothing was
    written since they were stored, and builds (and stores) them again when anything was."""
    objects = load_demo(nodes=8, seed=seed)
    rng = random.Random(seed)
    cluster = _Cluster(objects, rng)
    forget_membership_everywhere()
    forget_stored_units()
    first = unit_index()
    assert first.devices_read > 0
    assert _stored_units().devices == len(first.unit_of)
    taken = built = 0
    kinds: set[str] = set()
    for round_ in range(12):
        changes = 0 if round_ % 3 == 0 else rng.randint(1, 3)
        stamp = cluster.version
        written = [cluster.change() for _ in range(changes)]
        kinds.update(written)
        # Every write stamps a resourceVersion ("restore" with nothing removed writes nothing).
        moved = cluster.version != stamp
        restarted = _restart()
        if moved:
            assert restarted.devices_read > 0, (round_, written)
            built += 1
        else:
            assert restarted.devices_read == 0, round_
            taken += 1
        _same_as_scratch(restarted)
    assert taken >= 4
    assert built >= 4
    assert {"attribute", "delete", "add", "generation", "class"} <= kinds


@pytest.mark.django_db
def test_units_of_other_classes_or_slices_are_not_taken() -> None:
    """Units stored for a membership of other slices are not taken, even when the process's
    own fingerprint would match: the stored digest covers every slice's version."""
    load_demo(nodes=5, seed=1)
    forget_membership_everywhere()
    forget_stored_units()
    unit_index()
    membership = class_membership()
    assert units._read_stored(membership) is not None
    versions = dict(membership.slice_versions)
    pk = next(iter(versions))
    versions[pk] = ("other", versions[pk][1])
    assert units.read_kept("physical-units", units._digest(membership, versions)) is None
    assert units.read_kept("physical-units", units._digest(membership, {})) is None


@pytest.mark.django_db
def test_unreadable_stored_units_are_built_again() -> None:
    """A stored row this code cannot read is ignored: the units are built, equal to scratch, and
    stored readable again."""
    load_demo(nodes=5, seed=2)
    forget_membership_everywhere()
    forget_stored_units()
    unit_index()
    KeptMembership.objects.filter(name="physical-units").update(data=b"not zlib")
    restarted = _restart()
    assert restarted.devices_read > 0
    _same_as_scratch(restarted)
    assert _restart().devices_read == 0


@pytest.mark.django_db
def test_a_small_change_in_a_running_process_writes_nothing() -> None:
    """Units built again in a running process after a small slice change are not stored (the
    membership's outcomes are not either): the stored row stays as it was, and a restart then
    builds the units again, equal to scratch."""
    objects = load_demo(nodes=8, seed=4)
    cluster = _Cluster(objects, random.Random(4))
    forget_membership_everywhere()
    forget_stored_units()
    unit_index()
    stored = _stored_units()
    # One slice written again (a new resourceVersion): eight devices evaluated, nothing stored.
    name = sorted(cluster.slices)[0]
    cluster._write(cluster._stamp(copy.deepcopy(cluster.slices[name])))
    index = unit_index()
    assert index.devices_read > 0
    again = _stored_units()
    assert (again.stored_at, again.classes, bytes(again.data)) == (
        stored.stored_at,
        stored.classes,
        bytes(stored.data),
    )
    restarted = _restart()
    assert restarted.devices_read > 0
    _same_as_scratch(restarted)
