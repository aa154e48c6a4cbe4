"""Availability in physical units per DeviceClass: the one definition that the overview, the node,
pool and device list pages, `GET /api/inventory/availability/`, `/metrics` and what-if's stranded
summary share.

- **Physical unit**: a device that consumes no counters; or, for partitions (devices with
  `consumesCounters`: MIG slices, and the whole-GPU device of a partitionable GPU), the counter
  set they draw on, one per pool (driver/pool/counterSet). Counter sets of one pool that a single
  device draws on together are one unit. A counter set that no device draws on offers nothing
  and is no unit.
- **Free**: a new claim could get the unit now: no device on it is allocated (admin-access use
  takes nothing), and a device on it is neither tainted (NoSchedule or NoExecute, its own taints
  or a DeviceTaintRule) nor blocked (the counters its pool has left cannot cover it). A device is
  free on the same terms, one device at a time.
- **Membership**: a device unit belongs to a DeviceClass when the class's selectors match the
  device (`classes.class_membership`); a counter-set unit when they match any device on it, and
  it is free for the class when such a device is free. So the whole-GPU device of a MIG GPU
  puts the GPU in `gpu-h100` and its slices put it in `mig-1g.10gb`: one GPU, counted once per
  class.
- **Partitions**: devices that draw on part of their counter set (a device that takes every
  counter of its set(s) in full is the whole device, the unit itself). They are counted per
  profile under their parent unit, never added to whole devices. The profile is the string
  attribute the slice names in `partitionTypeAttribute` (KEP-5677), else the well-known
  `profile` attribute (NVIDIA's MIG devices carry it), else what the device takes from its
  counter set (`memory=10Gi multiprocessors=16`): devices that consume alike are one profile.

Which devices make up which unit, their partition profiles and the pools' counters change only
with ResourceSlices, so they are kept in process memory beside the class membership, under its
fingerprint (`claims.devices.units`). What holds or taints devices is
`classes.held_and_tainted`'s, kept until a claim or taint rule moves; blocked devices follow
from the held ones with quantity arithmetic over the cached counters, once per pool and
`consumesCounters` spelling. Nothing here runs CEL."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import F, Func, IntegerField, QuerySet, TextField, Value
from django.db.models.functions import Cast

from claims.devices.classes import ClassMembership, Holds, class_membership, held_and_tainted
from claims.devices.countersets import Counters, consumed_sets, counter_set_units
from claims.devices.states import _consumption, _exceeds
from claims.devices.units import UnitIndex, forget_units, unit_index, warm_units

__all__ = [
    "DEFINITION",
    "AvailabilityScope",
    "UnitIndex",
    "annotate_units",
    "class_availability",
    "class_unit_counts",
    "consumed_sets",
    "counter_set_units",
    "device_availability",
    "forget_units",
    "overdrawn_consumers",
    "unit_counts",
    "unit_index",
    "warm_units",
]

DEFINITION = (
    "A physical unit is a device, or for partitions (devices that consume shared counters) the "
    "counter set they share, per pool. It is free when a new claim could get it now: nothing on "
    "it allocated, and a device on it that the class selects neither tainted (NoSchedule or "
    "NoExecute) nor blocked by exhausted counters. Partitions are counted per profile under "
    "their parent unit, never added to whole devices."
)


@dataclass(frozen=True)
class AvailabilityScope:
    """Which units to count: those local to `node`, of pool `pool` (`driver/pool`), of `driver`.

    An empty field does not narrow; given fields must all hold. Network pools (all nodes, node
    selectors) have no node, so a node scope counts only what is local to the node.
    """

    node: str = ""
    driver: str = ""
    pool: str = ""

    def unit_ids(self, index: UnitIndex) -> frozenset[int] | None:
        """The unit ids in scope, or None for every unit."""
        chosen: list[frozenset[int]] = []
        if self.node:
            chosen.append(index.by_node.get(self.node, frozenset()))
        if self.pool:
            driver, _, pool = self.pool.partition("/")  # driver names have no slash
            chosen.append(index.by_pool.get((driver, pool), frozenset()))
        if self.driver:
            chosen.append(index.by_driver.get(self.driver, frozenset()))
        if not chosen:
            return None
        return frozenset.intersection(*chosen)


@dataclass(frozen=True)
class _Live:
    """What holds and taints devices now: `held` (non admin-access allocations), `bad` (not
    held, but tainted or blocked), and the units with a held (`taken`) or bad (`suspect`)
    device."""

    held: frozenset[int]
    bad: frozenset[int]
    taken: frozenset[int]
    suspect: frozenset[int]


def _blocked(index: UnitIndex, held: Iterable[int]) -> set[int]:
    """Consumers the counters their pool has left cannot cover (upstream's check: every counter
    of the pool, so one overdrawn counter blocks them all), and those that never fit."""
    return set(index.never_fits) | overdrawn_consumers(index, held)


# The last answer of `overdrawn_consumers`: a page asks it twice (device and unit counts).
_overdrawn: tuple[UnitIndex, frozenset[int], frozenset[int]] | None = None


def overdrawn_consumers(index: UnitIndex, held: Iterable[int]) -> set[int]:
    """Consumers of the pools with a held consumer that the counters left after the holders
    cannot cover (held ones included); pools nothing draws on are not looked at."""
    global _overdrawn
    held = frozenset(held)
    last = _overdrawn
    if last is not None and last[0] is index and last[1] == held:
        return set(last[2])
    blocked = _overdrawn_now(index, held)
    _overdrawn = (index, held, frozenset(blocked))
    return blocked


def _overdrawn_now(index: UnitIndex, held: frozenset[int]) -> set[int]:
    left: dict[int, Counters] = {}
    for pk in held:
        entry = index.spellings.get(pk)
        if entry is None:
            continue
        pool_id, spelling = entry
        counters = left.get(pool_id)
        if counters is None:
            counters = left[pool_id] = dict(index.counters.get(pool_id, {}))
        for key, value in _consumption(spelling).items():
            if key in counters:  # upstream skips counters its pool does not declare
                counters[key] -= value
    blocked: set[int] = set()
    # Pools of one model in the same state ask the same questions: each (counters left,
    # spelling) is decided once.
    verdicts: dict[tuple[frozenset[Any], str], bool] = {}
    for pool_id, counters in left.items():
        # Integers, not Fractions: the lookups compare signatures, and Fraction's equality is
        # Python code (a quarter of a second of comparisons at 5,000 nodes).
        signature = frozenset(
            (key, value.numerator, value.denominator) for key, value in counters.items()
        )
        for spelling, pks in index.consumers.get(pool_id, {}).items():
            exceeded = verdicts.get((signature, spelling))
            if exceeded is None:
                exceeded = verdicts[(signature, spelling)] = _exceeds(counters, spelling)
            if exceeded:
                blocked.update(pks)
    return blocked


def _live(index: UnitIndex, membership: ClassMembership, holds: Holds | None = None) -> _Live:
    held, _, tainted = holds or held_and_tainted(membership)
    bad = (tainted | _blocked(index, held)) - held
    unit_of = index.unit_of
    return _Live(
        held=frozenset(held),
        bad=frozenset(bad),
        taken=frozenset(unit_of[pk] for pk in held if pk in unit_of),
        suspect=frozenset(unit_of[pk] for pk in bad if pk in unit_of),
    )


def _free(index: UnitIndex, live: _Live, unit_id: int, members: frozenset[int] | None) -> bool:
    """Whether a claim (of the class whose `members` these are; None: any) could get the unit."""
    if unit_id in live.taken:
        return False
    if unit_id not in live.suspect:
        # Nothing on it is held, tainted or blocked, and it has a member (it is the class's).
        return True
    return any(
        pk not in live.bad and (members is None or pk in members)
        for pk in index.units[unit_id].devices
    )


def _scope_devices(index: UnitIndex, unit_ids: frozenset[int] | None) -> frozenset[int] | None:
    if unit_ids is None:
        return None
    return frozenset(pk for unit_id in unit_ids for pk in index.units[unit_id].devices)


def _counts(total: int, free: int) -> dict[str, int]:
    return {"total": total, "free": free}


def class_availability(
    scope: AvailabilityScope | None = None,
    *,
    device_class: str = "",
    membership: ClassMembership | None = None,
    holds: Holds | None = None,
) -> list[dict[str, Any]]:
    """Per DeviceClass (or the one named), sorted by name: `deviceClass`, `physical` {total,
    free} units, `devices` {total, free} the class selects, `partitions` [{profile, total, free,
    parents, parentsWithFree}], `celErrors` and `error`. A class whose selectors do not compile
    has `physical` and `devices` null and its compile error. Two queries once the units are
    cached (the fingerprint and the holds), whatever the cluster size; none when the caller
    passes the `membership` and `holds` it read for `classes.class_utilisation` too.
    """
    membership = membership or class_membership()
    index = unit_index(membership)
    live = _live(index, membership, holds)
    scope = scope or AvailabilityScope()
    unit_ids = scope.unit_ids(index)
    devices_in_scope = _scope_devices(index, unit_ids)
    names = sorted(membership.drivers)
    if device_class:
        names = [name for name in names if name == device_class]
    entries = []
    for name in names:
        members = membership.members.get(name)
        entry: dict[str, Any] = {
            "deviceClass": name,
            "physical": None,
            "devices": None,
            "partitions": [],
            "celErrors": membership.cel_errors.get(name, 0),
            "error": membership.errors.get(name),
        }
        entries.append(entry)
        if members is None:
            continue
        units = index.class_units.get(name, frozenset())
        if unit_ids is not None:
            units = units & unit_ids
        open_units = units - live.taken
        kept = sum(1 for u in open_units & live.suspect if not _free(index, live, u, members))
        entry["physical"] = _counts(len(units), len(open_units) - kept)
        chosen = members if devices_in_scope is None else members & devices_in_scope
        entry["devices"] = _counts(len(chosen), len(chosen - live.held - live.bad))
        for profile, pks in index.class_partitions.get(name, {}).items():
            if devices_in_scope is not None:
                pks = pks & devices_in_scope
            if not pks:
                continue
            free = pks - live.held - live.bad
            entry["partitions"].append(
                {
                    "profile": profile,
                    "total": len(pks),
                    "free": len(free),
                    "parents": len({index.unit_of[pk] for pk in pks}),
                    "parentsWithFree": len({index.unit_of[pk] for pk in free}),
                }
            )
    return entries


def device_availability(pks: Iterable[int]) -> dict[str, Any]:
    """`class_availability`'s numbers for any set of devices (a filtered device list): the
    units they are on, free when a claim for one of them could get the unit now; the devices,
    free on the same terms; their partitions per profile."""
    membership = class_membership()
    index = unit_index(membership)
    live = _live(index, membership)
    chosen = frozenset(pk for pk in pks if pk in index.unit_of)
    units = frozenset(index.unit_of[pk] for pk in chosen)
    free_devices = chosen - live.held - live.bad
    profiled: dict[str, set[int]] = defaultdict(set)
    for pk in chosen.intersection(index.profiles):
        profiled[index.profiles[pk]].add(pk)
    return {
        "physical": _counts(len(units), sum(_free(index, live, u, chosen) for u in units)),
        "devices": _counts(len(chosen), len(free_devices)),
        "partitions": [
            {
                "profile": profile,
                "total": len(found),
                "free": len(found & free_devices),
                "parents": len({index.unit_of[pk] for pk in found}),
                "parentsWithFree": len({index.unit_of[pk] for pk in found & free_devices}),
            }
            for profile, found in sorted(profiled.items())
        ],
    }


Grouping = Literal["node", "pool"]


def unit_counts(by: Grouping, *, device_class: str = "") -> dict[Any, dict[str, int]]:
    """Units {total, free} per node name (units local to it) or per pool id, of one class or,
    with no class, of every unit (free for a claim of any class). A class whose selectors do
    not compile selects nothing; an unknown class is a LookupError."""
    return class_unit_counts(by, device_classes=[device_class])[device_class]


def class_unit_counts(
    by: Grouping, *, device_classes: Iterable[str] | None = None, keys: Iterable[Any] | None = None
) -> dict[str, dict[Any, dict[str, int]]]:
    """Per class -> node name or pool id -> units {total, free}. `device_classes` None means
    every class; `""` among them means every unit, whatever its class. `keys` narrows to those
    nodes or pools. The holds are read once for all the classes asked."""
    membership = class_membership()
    names = sorted(membership.drivers) if device_classes is None else list(device_classes)
    unknown = sorted(set(names) - set(membership.drivers) - {""})
    if unknown:
        raise LookupError(f"DeviceClass {unknown[0]!r} does not exist")
    index = unit_index(membership)
    live = _live(index, membership)
    grouped = index.by_node if by == "node" else index.by_pool_id
    scope: frozenset[int] | None = None
    if keys is not None:
        scope = frozenset().union(*(grouped.get(key, frozenset()) for key in keys))
    result: dict[str, dict[Any, dict[str, int]]] = {}
    for name in names:
        members: frozenset[int] | None = None
        unit_ids: frozenset[int] = frozenset(range(len(index.units)))
        if name:
            members = membership.members.get(name, frozenset())
            unit_ids = index.class_units.get(name, frozenset())
        if scope is not None:
            unit_ids = unit_ids & scope
        counts: dict[Any, dict[str, int]] = defaultdict(lambda: _counts(0, 0))
        for unit_id in unit_ids:
            unit = index.units[unit_id]
            key = unit.node if by == "node" else unit.pool_id
            if by == "node" and not key:
                continue
            entry = counts[key]
            entry["total"] += 1
            if _free(index, live, unit_id, members):
                entry["free"] += 1
        result[name] = dict(counts)
    return result


class _Looked(Func):
    """`mapping[str(key)]` as an integer, 0 when absent: the mapping goes to the database as one
    JSON parameter, whatever its size (an IN list per value would hit SQLite's 32,766
    parameters on a cluster of 20,000 pools)."""

    output_field = IntegerField()

    def __init__(self, mapping: Mapping[str, int], key: str) -> None:
        super().__init__(Value(json.dumps(mapping)), Cast(F(key), TextField()))

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, tuple[Any, ...]]:
        mapping, key = self.get_source_expressions()
        mapping_sql, mapping_params = compiler.compile(mapping)
        key_sql, key_params = compiler.compile(key)
        if connection.vendor == "postgresql":
            sql = f"COALESCE(({mapping_sql}::jsonb ->> {key_sql})::integer, 0)"
        else:  # SQLite's JSON1; keys are pool ids and node names (DNS names: no quote)
            sql = f"""COALESCE(json_extract({mapping_sql}, '$."' || {key_sql} || '"'), 0)"""
        return sql, (*mapping_params, *key_params)


def annotate_units(
    queryset: QuerySet[Any], counts: Mapping[Any, Mapping[str, int]], *, field: str
) -> QuerySet[Any]:
    """Add `units_total` and `units_free` columns from `counts` (keyed by `field`'s value), so
    that lists filter and sort by them in SQL."""
    return queryset.annotate(
        units_total=_Looked({str(k): v["total"] for k, v in counts.items()}, field),
        units_free=_Looked({str(k): v["free"] for k, v in counts.items()}, field),
    )
