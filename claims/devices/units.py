"""The physical units of the current devices (`claims.devices.availability` defines them), kept in
process memory.

Which devices make up which unit, their partition profiles and the pools' counters change only
with ResourceSlices, so they are built in one read of every current device and kept beside the
class membership, under its fingerprint: a `UnitIndex` with the units, what each class selects of
them, and the units by node, pool and driver for scoped counts. Nothing here runs CEL.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, TextField, Value, When
from django.db.models.functions import Cast

from claims.devices.classes import ClassMembership, class_membership, held_and_tainted
from claims.devices.countersets import (
    Counters,
    _profile,
    _set_names,
    _whole,
    counter_set_units,
)
from claims.devices.states import _exceeds, _pool_counters, json_text
from dashboard.gcpause import gc_paused
from inventory.models import Device, ResourceSlice

__all__ = ["Unit", "UnitIndex", "forget_units", "unit_index", "warm_units"]


@dataclass(frozen=True)
class Unit:
    """One physical unit: its pool, the node its devices are local to ("" for network pools),
    its name (the device's, or the counter set's; `a+b` for sets drawn on together) and the pks
    of the devices on it."""

    driver: str
    pool: str
    pool_id: int
    node: str
    name: str
    counter_set: bool
    devices: tuple[int, ...]


@dataclass(frozen=True)
class UnitIndex:
    """The physical units of the current devices, and what each class and scope holds of them.

    `unit_of`: device pk -> unit id (an index into `units`); `profiles`: partition pk -> its
    profile; `spellings`: consumer pk -> (pool id, consumesCounters as JSON text); `counters`:
    pool id -> every counter of its current counter sets; `never_fits`: consumers that need more
    than their pool has at all; `class_units`: class -> unit ids it selects (the classes whose
    selectors compile); `class_partitions`: class -> profile -> partition pks it selects.
    """

    fingerprint: tuple[Any, ...]
    units: tuple[Unit, ...]
    unit_of: Mapping[int, int]
    profiles: Mapping[int, str]
    spellings: Mapping[int, tuple[int, str]]
    counters: Mapping[int, Counters]
    consumers: Mapping[int, Mapping[str, tuple[int, ...]]]
    never_fits: frozenset[int]
    class_units: Mapping[str, frozenset[int]]
    class_partitions: Mapping[str, Mapping[str, frozenset[int]]]
    by_node: Mapping[str, frozenset[int]] = field(default_factory=dict)
    by_pool: Mapping[tuple[str, str], frozenset[int]] = field(default_factory=dict)
    by_driver: Mapping[str, frozenset[int]] = field(default_factory=dict)
    by_pool_id: Mapping[int, frozenset[int]] = field(default_factory=dict)


_lock = threading.Lock()
_cached: UnitIndex | None = None


def forget_units() -> None:
    """Drop the cached units (tests; the fingerprint normally makes this unnecessary)."""
    global _cached
    with _lock:
        _cached = None


def warm_units() -> None:
    """Compute the class membership, the units and the holds now (a web process at start, in the
    background), so that the first page asking for them does not pay for it: seconds of CEL and
    reading at 5,000 nodes. Requests that come meanwhile wait for it rather than repeat it."""
    membership = class_membership()
    unit_index(membership)
    held_and_tainted(membership)


def unit_index(membership: ClassMembership | None = None) -> UnitIndex:
    """The units of the current devices, rebuilt only when the class membership's fingerprint
    (ResourceSlices and DeviceClasses) moves."""
    global _cached
    membership = membership or class_membership()
    cached = _cached
    if cached is not None and cached.fingerprint == membership.fingerprint:
        return cached
    with _lock:
        if _cached is not None and _cached.fingerprint == membership.fingerprint:
            return _cached
        # As for the membership: the collector would walk the rows read again and again.
        with gc_paused():
            _cached = _build(membership)
        return _cached


def _build(membership: ClassMembership) -> UnitIndex:
    known = set(membership.keys.values())
    # One read of every current device; attributes only for consumers (the partition profile).
    rows = (
        Device.objects.filter(current=True, slice__classic=False)
        .annotate(
            spelling=Cast("consumes_counters", TextField()),
            consumer_attributes=Case(
                When(consumes_counters=[], then=Value(None)),
                default=Cast("attributes", TextField()),
                output_field=TextField(),
            ),
        )
        .order_by("driver", "pool_name", "name")
        .values_list(
            "pk",
            "driver",
            "pool_name",
            "pool_id",
            "node_name",
            "name",
            "spelling",
            "consumer_attributes",
            "slice_id",
        )
    )
    # The partition type attribute is the slice's: read once per slice, not once per device.
    type_attributes = dict(
        ResourceSlice.objects.filter(classic=False)
        .exclude(obj__spec__partitionTypeAttribute=None)
        .values_list("pk", "obj__spec__partitionTypeAttribute")
    )
    units: list[Unit] = []
    consumers: list[tuple[int, str, str, int, str, str, tuple[str, ...]]] = []
    # The attributes as text until a profile needs them: decoded, every partition's attributes
    # held at once were 140 MB at 5,000 nodes; the rows are streamed for the same reason.
    described: dict[int, tuple[str | None, Any]] = {}
    for pk, driver, pool, pool_id, node, name, spelling, attributes, slice_id in rows.iterator(
        chunk_size=2000
    ):
        if pk not in known:  # written after the membership was computed: next fingerprint
            continue
        set_names = _set_names(spelling)
        if set_names:
            consumers.append((pk, driver, pool, pool_id, node, spelling, set_names))
            described[pk] = (attributes, type_attributes.get(slice_id))
        else:
            units.append(Unit(driver, pool, pool_id, node, name, counter_set=False, devices=(pk,)))
    unit_of = {unit.devices[0]: index for index, unit in enumerate(units)}
    counters = _pool_counters({row[3] for row in consumers})

    consumed: dict[int, list[tuple[str, ...]]] = defaultdict(list)
    for *_, pool_id, _, _, set_names in consumers:
        consumed[pool_id].append(set_names)
    unit_names = {pool_id: counter_set_units(names) for pool_id, names in consumed.items()}
    grouped: dict[tuple[int, str], list[int]] = defaultdict(list)
    first: dict[tuple[int, str], tuple[str, str, str]] = {}
    spellings: dict[int, tuple[int, str]] = {}
    by_spelling: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    profiles: dict[int, str] = {}
    # Pools of one model declare the same counters and their devices the same spellings: is a
    # spelling the whole device is decided once per (spelling, counters), not once per device.
    signatures: dict[int, frozenset[Any]] = {}
    wholes: dict[tuple[str, frozenset[Any]], bool] = {}
    for pk, driver, pool, pool_id, node, spelling, set_names in consumers:
        group = (pool_id, unit_names[pool_id][set_names[0]])
        grouped[group].append(pk)
        first.setdefault(group, (driver, pool, node))
        spellings[pk] = (pool_id, spelling)
        by_spelling[pool_id][spelling].append(pk)
        signature = signatures.get(pool_id)
        if signature is None:
            signature = signatures[pool_id] = frozenset(counters.get(pool_id, {}).items())
        whole = wholes.get((spelling, signature))
        if whole is None:
            whole = wholes[(spelling, signature)] = _whole(spelling, counters.get(pool_id, {}))
        if not whole:
            attributes, type_attribute = described.get(pk, (None, None))
            profiles[pk] = _profile(
                json_text(attributes),
                driver=driver,
                spelling=spelling,
                type_attribute=type_attribute,
            )
    for group, pks in grouped.items():
        pool_id, name = group
        driver, pool, node = first[group]
        unit_of.update((pk, len(units)) for pk in pks)
        units.append(Unit(driver, pool, pool_id, node, name, counter_set=True, devices=tuple(pks)))

    never_fits = {
        pk
        for pool_id, spelled in by_spelling.items()
        for spelling, pks in spelled.items()
        if _exceeds(counters.get(pool_id, {}), spelling)
        for pk in pks
    }
    class_units: dict[str, frozenset[int]] = {}
    class_partitions: dict[str, dict[str, frozenset[int]]] = {}
    for class_name, members in membership.members.items():
        class_units[class_name] = frozenset(unit_of[pk] for pk in members if pk in unit_of)
        profiled: dict[str, set[int]] = defaultdict(set)
        for pk in members.intersection(profiles):
            profiled[profiles[pk]].add(pk)
        class_partitions[class_name] = {p: frozenset(pks) for p, pks in sorted(profiled.items())}
    by_node: dict[str, set[int]] = defaultdict(set)
    by_pool: dict[tuple[str, str], set[int]] = defaultdict(set)
    by_driver: dict[str, set[int]] = defaultdict(set)
    by_pool_id: dict[int, set[int]] = defaultdict(set)
    for index, unit in enumerate(units):
        by_pool_id[unit.pool_id].add(index)
        if unit.node:
            by_node[unit.node].add(index)
        by_pool[(unit.driver, unit.pool)].add(index)
        by_driver[unit.driver].add(index)
    return UnitIndex(
        fingerprint=membership.fingerprint,
        units=tuple(units),
        unit_of=unit_of,
        profiles=profiles,
        spellings=spellings,
        counters=counters,
        consumers={
            pool_id: {spelling: tuple(pks) for spelling, pks in spelled.items()}
            for pool_id, spelled in by_spelling.items()
        },
        never_fits=frozenset(never_fits),
        class_units=class_units,
        class_partitions=class_partitions,
        by_node=_frozen(by_node),
        by_pool=_frozen(by_pool),
        by_driver=_frozen(by_driver),
        by_pool_id=_frozen(by_pool_id),
    )


def _frozen(groups: Mapping[Any, set[int]]) -> dict[Any, frozenset[int]]:
    return {key: frozenset(values) for key, values in groups.items()}
