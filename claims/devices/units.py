"""The physical units of the current devices (`claims.devices.availability` defines them), kept in
process memory.

Which devices make up which unit, their partition profiles and the pools' counters change only
with ResourceSlices, so they are built in one read of every current device and kept beside the
class membership, under its fingerprint: a `UnitIndex` with the units, what each class selects of
them, and the units by node, pool and driver for scoped counts. Nothing here runs CEL.

Building them reads every current device (0.9 s of CPU at 5,000 nodes), so they are also kept in
the database (`stored`, a row beside the membership's outcomes) under a digest of every
structured slice's version and of the classes: a new process takes them when nothing was written
since, and builds them (and stores them) otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
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
from claims.devices.stored import (
    SliceVersion,
    forget_kept,
    read_kept,
    sources_digest,
    store_kept,
)
from dashboard.kept import Kept
from inventory.models import Device, ResourceSlice

__all__ = [
    "UNITS_VERSION",
    "Unit",
    "UnitIndex",
    "forget_stored_units",
    "forget_units",
    "unit_index",
    "warm_units",
]

log = logging.getLogger(__name__)

# Raised when what is stored changes meaning (the code's own changes are in `_code_digest`).
UNITS_VERSION = 1
_NAME = "physical-units"
# Clusters with fewer devices are built by every process (a few milliseconds), as for the
# membership's outcomes (`classes`).
_STORE_MIN = 2000


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
    # Device rows read to build it: none when it was read as stored by an earlier process.
    devices_read: int = 0


# Kept under the class membership's fingerprint (ResourceSlices and DeviceClasses); as for the
# membership, the collector would walk the rows read again and again.
_units: Kept[UnitIndex] = Kept(pause_gc=True)


def forget_units() -> None:
    """Drop the kept units (tests; the fingerprint normally makes this unnecessary)."""
    _units.forget()


def warm_units() -> None:
    """Compute the class membership, the units and the holds now (a web process at start, in the
    background), so that the first page asking for them does not pay for it: seconds of CEL and
    reading at 5,000 nodes. Requests that come meanwhile wait for it rather than repeat it."""
    membership = class_membership()
    unit_index(membership)
    held_and_tainted(membership)


def unit_index(membership: ClassMembership | None = None) -> UnitIndex:
    """The units of the current devices, rebuilt only when the class membership's fingerprint
    (ResourceSlices and DeviceClasses) moves; a new process takes those an earlier one stored
    for the same slices and classes (`_read_stored`)."""
    membership = membership or class_membership()
    return _units.get(membership.fingerprint, lambda kept: _compute(membership, kept))


def _compute(membership: ClassMembership, kept: UnitIndex | None) -> UnitIndex:
    """Read as stored, or built: a process's first units are looked up in the database and
    stored when built. Later ones are stored only with the membership's outcomes (a change
    of thousands of devices, see `classes`): a page after a small change makes no write.
    Below _STORE_MIN devices nothing is stored or looked up: building costs milliseconds."""
    if len(membership.keys) < _STORE_MIN:
        return _build(membership)
    if kept is None:
        stored = _read_stored(membership)
        if stored is not None:
            return stored
    index = _build(membership)
    if kept is None or (membership.evaluations and not membership.unstored):
        _store(membership, index)
    return index


def forget_stored_units() -> None:
    """Delete the units stored for the next process (tests: a new database)."""
    forget_kept(_NAME)


@lru_cache(maxsize=1)
def _code_digest() -> str:
    here = Path(__file__).resolve().parent
    return sources_digest(*(here / name for name in ("units.py", "countersets.py", "states.py")))


def _digest(membership: ClassMembership, versions: Mapping[int, SliceVersion]) -> str:
    """What the units of `membership` follow from: the classes' digest (with the membership's
    code), every structured slice's version (its devices, counter sets and pool are written
    with it), the units' code and UNITS_VERSION."""
    listed = sorted(
        [pk, rv, synced.isoformat() if isinstance(synced, datetime) else None]
        for pk, (rv, synced) in versions.items()
    )
    text = orjson.dumps([UNITS_VERSION, _code_digest(), membership.classes_digest, listed])
    return hashlib.sha256(text).hexdigest()


def _slice_versions() -> dict[int, SliceVersion]:
    # As `classes` reads them for the membership.
    return {
        pk: (version, synced)
        for pk, version, synced in ResourceSlice.objects.filter(classic=False)
        .order_by()
        .values_list("pk", "resource_version", "synced_at")
    }


def _read_stored(membership: ClassMembership) -> UnitIndex | None:
    """The units an earlier process stored for the very slices and classes of `membership`
    (any slice written since, or another class, and nothing is used)."""
    if not membership.classes_digest or not membership.slice_versions:
        return None
    data = read_kept(_NAME, _digest(membership, membership.slice_versions))
    if data is None:
        return None
    try:
        return _decode(membership, data)
    except (ValueError, TypeError, KeyError, IndexError, zlib.error, orjson.JSONDecodeError):
        # Only a row this code did not write can fail here: building is correct.
        log.warning("stored physical units unreadable; building them again", exc_info=True)
        return None


def _store(membership: ClassMembership, index: UnitIndex) -> None:
    # Stored only when no slice moved while it was built (the devices read are then those of
    # the membership's slice versions): what is stored is what a later build would find.
    if membership.classes_digest and membership.slice_versions == _slice_versions():
        store_kept(
            _NAME,
            _digest(membership, membership.slice_versions),
            count=len(index.unit_of),
            data=_encode(index),
        )


def _encode(index: UnitIndex) -> bytes:
    strings: dict[str, int] = {}

    def at(text: str) -> int:
        return strings.setdefault(text, len(strings))

    units = [
        [at(u.driver), at(u.pool), u.pool_id, at(u.node), at(u.name), int(u.counter_set)]
        + list(u.devices)
        for u in index.units
    ]
    payload = {
        "units": units,
        "profiles": [list(index.profiles), [at(p) for p in index.profiles.values()]],
        "spellings": [
            list(index.spellings),
            [pool_id for pool_id, _ in index.spellings.values()],
            [at(spelling) for _, spelling in index.spellings.values()],
        ],
        "counters": [
            [pool_id, [[at(s), at(c), v.numerator, v.denominator] for (s, c), v in kept.items()]]
            for pool_id, kept in index.counters.items()
        ],
        "neverFits": sorted(index.never_fits),
        "strings": list(strings),
    }
    return zlib.compress(orjson.dumps(payload), 1)


def _decode(membership: ClassMembership, data: bytes) -> UnitIndex:
    payload = orjson.loads(zlib.decompress(data))
    text = payload["strings"]
    units = tuple(
        Unit(text[d], text[p], pool_id, text[n], text[name], bool(cs), tuple(pks))
        for d, p, pool_id, n, name, cs, *pks in payload["units"]
    )
    pks, names = payload["profiles"]
    profiles = {pk: text[i] for pk, i in zip(pks, names, strict=True)}
    pks, pools, spelled = payload["spellings"]
    spellings = {pk: (pool_id, text[i]) for pk, pool_id, i in zip(pks, pools, spelled, strict=True)}
    counters: dict[int, Counters] = {
        pool_id: {(text[s], text[c]): Fraction(num, den) for s, c, num, den in kept}
        for pool_id, kept in payload["counters"]
    }
    return _assemble(
        membership,
        units=units,
        profiles=profiles,
        spellings=spellings,
        counters=counters,
        never_fits=frozenset(payload["neverFits"]),
    )


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
    read = 0
    for pk, driver, pool, pool_id, node, name, spelling, attributes, slice_id in rows.iterator(
        chunk_size=2000
    ):
        read += 1
        if pk not in known:  # written after the membership was computed: next fingerprint
            continue
        set_names = _set_names(spelling)
        if set_names:
            consumers.append((pk, driver, pool, pool_id, node, spelling, set_names))
            described[pk] = (attributes, type_attributes.get(slice_id))
        else:
            units.append(Unit(driver, pool, pool_id, node, name, counter_set=False, devices=(pk,)))
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
            # Integers, not Fractions: Fraction's equality is Python code (see availability).
            signature = signatures[pool_id] = frozenset(
                (key, value.numerator, value.denominator)
                for key, value in counters.get(pool_id, {}).items()
            )
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
        units.append(Unit(driver, pool, pool_id, node, name, counter_set=True, devices=tuple(pks)))

    never_fits = {
        pk
        for pool_id, spelled in by_spelling.items()
        for spelling, pks in spelled.items()
        if _exceeds(counters.get(pool_id, {}), spelling)
        for pk in pks
    }
    return _assemble(
        membership,
        units=tuple(units),
        profiles=profiles,
        spellings=spellings,
        counters=counters,
        never_fits=frozenset(never_fits),
        devices_read=read,
    )


def _assemble(
    membership: ClassMembership,
    *,
    units: tuple[Unit, ...],
    profiles: dict[int, str],
    spellings: dict[int, tuple[int, str]],
    counters: Mapping[int, Counters],
    never_fits: frozenset[int],
    devices_read: int = 0,
) -> UnitIndex:
    """The index of `units` (built, or read as stored): what follows from them, their profiles
    and spellings, and the membership."""
    unit_of = {pk: index for index, unit in enumerate(units) for pk in unit.devices}
    by_spelling: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for pk, (pool_id, spelling) in spellings.items():
        by_spelling[pool_id][spelling].append(pk)
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
        units=units,
        unit_of=unit_of,
        profiles=profiles,
        spellings=spellings,
        counters=counters,
        consumers={
            pool_id: {spelling: tuple(pks) for spelling, pks in spelled.items()}
            for pool_id, spelled in by_spelling.items()
        },
        never_fits=never_fits,
        class_units=class_units,
        class_partitions=class_partitions,
        by_node=_frozen(by_node),
        by_pool=_frozen(by_pool),
        by_driver=_frozen(by_driver),
        by_pool_id=_frozen(by_pool_id),
        devices_read=devices_read,
    )


def _frozen(groups: Mapping[Any, set[int]]) -> dict[Any, frozenset[int]]:
    return {key: frozenset(values) for key, values in groups.items()}
