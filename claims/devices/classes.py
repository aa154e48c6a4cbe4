"""Devices per DeviceClass, decided by the class's CEL selectors as the scheduler decides them.

A device belongs to a class when every `spec.selectors[].cel.expression` of the class matches it,
evaluated in order and stopping at the first that does not (upstream's order, so a later selector
that would fail on another driver's device is never reached). A runtime error on a device means
"does not match" here, and is counted per class (`cel_errors`); a selector that does not compile
leaves the class uncounted with the error. Only current devices of structured (non-classic)
slices are considered.

Membership changes only when ResourceSlices or DeviceClasses change, while evaluating CEL over a
hundred thousand devices takes seconds: it is kept in process memory under the versions of those
two tables (`inventory.versions`) and brought up to date when they move. Only the devices of slices
written since (another resourceVersion or `synced_at`) are evaluated again when the classes are
unchanged; the others keep their outcome, so a slice change costs CEL over that slice's devices,
not the cluster's. The outcomes are also kept in the database (`stored`) for the next process,
which then evaluates only the devices of slices written since they were stored. What holds or
taints the members is read from the database on every call, with a few flat queries.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar

from django.db import connection
from django.db.models import (
    BooleanField,
    Exists,
    IntegerField,
    Model,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.functions import Cast

from claims.devices.states import json_text, rule_taints
from claims.devices.stored import (
    Outcome,
    SliceVersion,
    StoredOutcomes,
    classes_digest,
    forget_stored_outcomes,
    read_outcomes,
    store_outcomes,
)
from claims.models import AllocatedDevice, ResourceClaim
from dashboard.kept import Kept
from dralib.allocator.cel import CELError, CompiledSelector, DeviceInput, compile_selector
from inventory.models import Device, DeviceClass, DeviceTaintRule, ResourceSlice
from inventory.versions import read_versions

__all__ = [
    "CLASS_METHOD",
    "ClassMembership",
    "Holds",
    "class_membership",
    "class_utilisation",
    "forget_membership",
    "forget_membership_everywhere",
    "held_and_tainted",
    "table_fingerprint",
    "written_since",
]

CLASS_METHOD = (
    "Exact: a device belongs to a DeviceClass when all of the class's CEL selectors match it, "
    "as the scheduler decides. A CEL runtime error on a device counts as no match and is shown "
    "as a CEL error."
)

DeviceKey = tuple[str, str, str]
M = TypeVar("M", bound=Model)
Fingerprint = tuple[Any, ...]
# Device pks held (non admin-access), held by admin-access allocations only, and tainted.
Holds = tuple[set[int], set[int], set[int]]
# Stored again once the devices evaluated since the outcomes were last stored (or read) are
# a twentieth of all and at least _STORE_MIN: a restart then evaluates at most about that many
# again. Below the minimum, evaluating again costs less than a write (a few ms of CEL), and a
# page after a small change makes no write.
_STORE_SHARE = 20
_STORE_MIN = 2000


@dataclass(frozen=True)
class ClassMembership:
    """Which current devices each DeviceClass selects, and what was learnt evaluating it.

    `members`: class name -> device pks; `cel_errors`: class name -> devices whose evaluation
    raised; `errors`: class name -> the first error message (compile error when the class has no
    `members` entry); `keys`: driver/pool/device -> pk of every considered device; `multiple`:
    pks of devices that allow multiple allocations.
    """

    fingerprint: Fingerprint
    members: Mapping[str, frozenset[int]]
    cel_errors: Mapping[str, int]
    errors: Mapping[str, str]
    keys: Mapping[DeviceKey, int]
    multiple: frozenset[int]
    evaluations: int = 0
    drivers: Mapping[str, str | None] = field(default_factory=dict)
    # For the next, incremental computation: each device's outcome and each slice's version,
    # decided with the classes of `classes_digest`; devices evaluated since they were stored.
    outcomes: Mapping[int, Outcome] = field(default_factory=dict, repr=False)
    slice_versions: Mapping[int, SliceVersion] = field(default_factory=dict, repr=False)
    classes_digest: str = ""
    unstored: int = 0


# Kept under the fingerprint of the slices and classes; paused collector: a hundred thousand
# decoded devices set off full collections that walk them again and again (half the
# computation's CPU at 5,000 nodes).
_membership: Kept[ClassMembership] = Kept(pause_gc=True)


def table_fingerprint(*models: type[Model]) -> Fingerprint:
    """The models' table versions (`inventory.versions`), three values per table: version,
    deleting transactions and when the last writer began, in one statement. Any transaction
    that commits a write after it was read moves it."""
    return tuple(value for state in read_versions(models) for value in state)


def _fingerprint() -> Fingerprint:
    """Cheap summary of ResourceSlice and DeviceClass: any write or delete moves it."""
    return table_fingerprint(ResourceSlice, DeviceClass)


def forget_membership() -> None:
    """Drop the cached membership (tests; the fingerprint normally makes this unnecessary)."""
    _membership.forget()
    _holds.forget()


def forget_membership_everywhere() -> None:
    """Drop the kept membership and the outcomes stored in the database (tests: the next
    computation is then one from scratch, as in a new process on a new database)."""
    forget_membership()
    forget_stored_outcomes()


def class_membership() -> ClassMembership:
    """The membership of every DeviceClass, recomputed only when slices or classes changed."""
    fingerprint = _fingerprint()
    return _membership.get(fingerprint, lambda previous: _compute(fingerprint, previous=previous))


def _raw_rows(queryset: QuerySet[Any, tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The rows as the database driver returns them: without Django's converter per value
    (a boolean's, for 100,000 devices at 5,000 nodes: a tenth of a restart's membership).
    Only for columns whose raw values mean the same (SQLite's 0/1 for a boolean is tested
    for truth only)."""
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(2000):
            yield from rows


def _class_selectors(device_class: DeviceClass) -> list[CompiledSelector] | str:
    """The compiled selectors of a class, or an error naming the class and the field."""
    where = f"DeviceClass {device_class.name}"
    selectors = device_class.selectors
    if selectors is None:
        return []
    if not isinstance(selectors, list):
        return f"{where}: spec.selectors must be a list"
    compiled: list[CompiledSelector] = []
    for index, item in enumerate(selectors):
        cel = item.get("cel") if isinstance(item, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if not isinstance(expression, str):
            return f"{where}: spec.selectors[{index}].cel.expression is required"
        try:
            compiled.append(compile_selector(expression))
        except CELError as exc:
            return f"{where}: spec.selectors[{index}].cel.expression: {exc}"
    return compiled


_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([A-Za-z0-9.\-]+)"\s*$')


@lru_cache(maxsize=1024)
def _driver_literal(expression: str) -> str | None:
    # Asked once per selector and device: the match is kept per expression.
    literal = _DRIVER_SELECTOR.match(expression)
    return None if literal is None else literal.group(1)


def _evaluate(selector: CompiledSelector, device: DeviceInput) -> bool | str:
    """Whether the selector matches, or the runtime error message."""
    # The commonest selector compares the driver with a plain literal: answered without CEL,
    # with the same result (device.driver is always a string).
    literal = _driver_literal(selector.expression)
    if literal is not None:
        return device.driver == literal
    try:
        return selector.matches(device)
    except CELError as exc:
        return str(exc)


def _compute(fingerprint: Fingerprint, *, previous: ClassMembership | None) -> ClassMembership:
    classes = list(DeviceClass.objects.only("pk", "name", "selectors").order_by("name"))
    compiled = {device_class.name: _class_selectors(device_class) for device_class in classes}
    digest = classes_digest((c.name, c.selectors) for c in classes)
    # Outcomes carry over only while the classes' selectors are the same; a new process starts
    # from those the database keeps (`stored`), as if it had computed them itself.
    if previous is not None and previous.classes_digest != digest:
        previous = None
    start: ClassMembership | StoredOutcomes | None = previous
    if previous is None:
        start = read_outcomes(digest)
    versions: dict[int, SliceVersion] = {
        pk: (version, synced)
        for pk, version, synced in ResourceSlice.objects.filter(classic=False)
        .order_by()
        .values_list("pk", "resource_version", "synced_at")
    }
    known = start.slice_versions if start is not None else {}
    unchanged = {pk for pk, version in versions.items() if known.get(pk) == version}
    kept = start.outcomes if start is not None else {}
    current = Device.objects.filter(current=True, slice__classic=False).order_by()
    # The devices first, then the attributes of those on changed slices (of all, the first time):
    # the same two queries whatever changed, which the pages' query counts rely on.
    fields = ("pk", "slice_id", "driver", "pool_name", "name", "allow_multiple_allocations")
    keys: dict[DeviceKey, int] = {}
    multiple: set[int] = set()
    outcomes: dict[int, Outcome] = {}
    again: list[int] = []
    again_slices: set[int] = set()
    interned: dict[Outcome, Outcome] = {}
    evaluations = 0

    def evaluate(pk: int, where: DeviceKey, attributes: Any, capacity: Any) -> None:
        nonlocal evaluations
        device = DeviceInput(
            driver=where[0],
            attributes=attributes if isinstance(attributes, dict) else {},
            capacity=capacity if isinstance(capacity, dict) else {},
            allow_multiple_allocations=pk in multiple,
        )
        outcome, count = _outcome(compiled, device, where=where)
        evaluations += count
        # Most devices have one of a few outcomes: share them.
        outcomes[pk] = interned.setdefault(outcome, outcome)

    texts = {
        "attributes_text": Cast("attributes", TextField()),
        "capacity_text": Cast("capacity", TextField()),
    }
    for pk, slice_id, driver, pool_name, name, allow_multiple in _raw_rows(
        current.values_list(*fields)
    ):
        keys[(driver, pool_name, name)] = pk
        if allow_multiple:
            multiple.add(pk)
        outcome = kept.get(pk) if slice_id in unchanged else None
        if outcome is None:
            again.append(pk)
            # A device can also be new to the membership on an unchanged slice (its pool's
            # generation became current): its slice counts for the query below too.
            again_slices.add(slice_id)
        else:
            outcomes[pk] = outcome
    # One query whatever the change: the devices of slices written since the oldest of their
    # slices (few, on a live cluster), of which those to evaluate. A slice written after the
    # versions were read has none: the fingerprint has moved, the next call evaluates it.
    oldest = min((versions[pk][1] for pk in again_slices if pk in versions), default=None)
    if oldest is not None:
        wanted = set(again)
        changed = current if start is None else current.filter(slice__synced_at__gte=oldest)
        # As text, decoded here only for the devices wanted (see states.json_text).
        for pk, driver, pool_name, name, attributes, capacity in changed.annotate(
            **texts
        ).values_list("pk", "driver", "pool_name", "name", *texts):
            if pk in wanted:
                where = (driver, pool_name, name)
                evaluate(pk, where, json_text(attributes), json_text(capacity))
    members: dict[str, set[int]] = {
        name: set() for name, selectors in compiled.items() if not isinstance(selectors, str)
    }
    cel_errors = dict.fromkeys(members, 0)
    errors = {name: selectors for name, selectors in compiled.items() if isinstance(selectors, str)}
    by_outcome: dict[Outcome, list[int]] = defaultdict(list)
    for pk in keys.values():
        outcome = outcomes.get(pk)
        if outcome is not None:  # a device written after the rows were read: next time
            by_outcome[outcome].append(pk)
    for (matched, failed), pks in by_outcome.items():
        for class_name in matched:
            members[class_name].update(pks)
        for class_name, message in failed:
            cel_errors[class_name] += len(pks)
            errors.setdefault(class_name, message)
    unstored = len(again) + (previous.unstored if previous is not None else 0)
    if (
        unstored >= _STORE_MIN
        and unstored * _STORE_SHARE >= len(outcomes)
        and store_outcomes(digest, outcomes, versions)
    ):
        unstored = 0
    return ClassMembership(
        fingerprint=fingerprint,
        members={name: frozenset(pks) for name, pks in members.items()},
        cel_errors=cel_errors,
        errors=errors,
        keys=keys,
        multiple=frozenset(multiple),
        evaluations=evaluations,
        drivers={device_class.name: device_class.selected_driver for device_class in classes},
        outcomes=outcomes,
        slice_versions=versions,
        classes_digest=digest,
        unstored=unstored,
    )


def _outcome(
    compiled: Mapping[str, list[CompiledSelector] | str], device: DeviceInput, *, where: DeviceKey
) -> tuple[Outcome, int]:
    """The classes whose selectors all match the device, the runtime errors, and how many
    selectors were evaluated."""
    matched: list[str] = []
    failed: list[tuple[str, str]] = []
    evaluations = 0
    # Classes share selectors (the driver check above all): evaluate each once per device.
    seen: dict[str, bool | str] = {}
    for class_name, selectors in compiled.items():
        if isinstance(selectors, str):
            continue
        outcome: bool | str = True
        for selector in selectors:
            result = seen.get(selector.expression)
            if result is None:
                evaluations += 1
                result = _evaluate(selector, device)
                seen[selector.expression] = result
            if isinstance(result, str):
                outcome = f"{class_name}: {'/'.join(where)}: {result}"
                break
            if not result:
                outcome = False
                break
        if outcome is True:
            matched.append(class_name)
        elif outcome is not False:
            failed.append((class_name, outcome))
    return (tuple(matched), tuple(failed)), evaluations


def _taint_rules_match() -> Q:
    # The rule side of claims.devices.states' taint condition, shared rather than restated.

    return Q(Exists(rule_taints()))


@dataclass(frozen=True)
class _KeptHolds:
    """The holds as of `fingerprint` (membership, taint rules, claims); per claim the devices
    its allocations hold (non admin-access, admin-access) by driver/pool/device, and the
    tainted devices' keys: what following a change of claims or slices starts from."""

    fingerprint: Fingerprint
    holds: Holds
    by_claim: Mapping[int, tuple[frozenset[DeviceKey], frozenset[DeviceKey]]]
    tainted: frozenset[DeviceKey]


_holds: Kept[_KeptHolds] = Kept()
# More claims changed than this since the holds were read: they are read whole.
_FEW_CLAIMS = 200


def _holds_fingerprint(membership: ClassMembership) -> Fingerprint:
    """What the holds follow: the slices and classes (devices' own taints), the DeviceTaintRules
    and the claims (every allocation is written with its claim, and goes with it)."""
    tables = table_fingerprint(ResourceClaim, DeviceTaintRule)
    return (membership.fingerprint, tables[3:], tables[:3])


def held_and_tainted(membership: ClassMembership) -> Holds:
    """Device pks held (non admin-access), held by admin-access allocations only, and tainted:
    read once, they serve both the device counts and the units of a page, and kept until a
    claim, a taint rule or the membership changes (one small query says whether one did).
    After a change of claims, only the allocations of the claims written since are read; after
    a change of slices, only the tainted devices."""
    fingerprint = _holds_fingerprint(membership)
    kept = _holds.get(
        fingerprint,
        lambda previous: (
            _follow_changes(previous, fingerprint, membership)
            or _read_holds(fingerprint, membership)
        ),
    )
    held, admin, tainted = kept.holds
    # Copies: callers combine them with set operators in place.
    return set(held), set(admin), set(tainted)


def _follow_changes(
    kept: _KeptHolds | None, fingerprint: Fingerprint, membership: ClassMembership
) -> _KeptHolds | None:
    if kept is None or kept.fingerprint[1] != fingerprint[1]:
        return None
    if kept.fingerprint[0] != fingerprint[0] and kept.fingerprint[2] != fingerprint[2]:
        return None  # slices and claims both moved: one read of everything, as at the start
    changed = written_since(ResourceClaim, kept.fingerprint[2], fingerprint[2], limit=_FEW_CLAIMS)
    if changed is None:
        return None
    claims = {claim.pk for claim in changed}
    allocations = AllocatedDevice.objects.filter(claim_id__in=sorted(claims)).order_by()
    found: dict[int, tuple[set[DeviceKey], set[DeviceKey]]] = {}
    for claim, driver, pool, device, admin_access in allocations.values_list(
        "claim_id", "driver", "pool", "device", "admin_access"
    ):
        found.setdefault(claim, (set(), set()))[1 if admin_access else 0].add(
            (driver, pool, device)
        )
    by_claim = {claim: keys for claim, keys in kept.by_claim.items() if claim not in claims}
    by_claim.update((claim, (frozenset(h), frozenset(a))) for claim, (h, a) in found.items())
    tainted = kept.tainted
    if kept.fingerprint[0] != fingerprint[0]:  # slices moved: their devices' own taints
        tainted = frozenset(
            (driver, pool, device) for _, driver, pool, device, _ in _tainted_devices()
        )
    return _combined(fingerprint, membership, by_claim, tainted)


def _combined(
    fingerprint: Fingerprint,
    membership: ClassMembership,
    by_claim: Mapping[int, tuple[frozenset[DeviceKey], frozenset[DeviceKey]]],
    tainted: frozenset[DeviceKey],
) -> _KeptHolds:
    """The holds as device pks of the membership (a key it does not know is no device)."""
    keys = membership.keys
    held: set[int] = set()
    admin: set[int] = set()
    for claim_held, claim_admin in by_claim.values():
        held.update(keys[key] for key in claim_held if key in keys)
        admin.update(keys[key] for key in claim_admin if key in keys)
    marked = {keys[key] for key in tainted if key in keys}
    return _KeptHolds(fingerprint, (held, admin - held, marked), by_claim, tainted)


def _tainted_devices() -> QuerySet[Device, tuple[Any, ...]]:
    # Tainted devices are few; None marks them (admin_access is a boolean on the other side).
    return (
        Device.objects.filter(current=True, slice__classic=False)
        .filter(Q(tainted=True) | _taint_rules_match())
        .order_by()
        .values_list(
            Value(None, output_field=IntegerField()),
            "driver",
            "pool_name",
            "name",
            Value(None, output_field=BooleanField()),
        )
    )


def _read_holds(fingerprint: Fingerprint, membership: ClassMembership) -> _KeptHolds:
    allocations = AllocatedDevice.objects.order_by().values_list(
        "claim_id", "driver", "pool", "device", "admin_access"
    )
    tainted: set[DeviceKey] = set()
    found: dict[int, tuple[set[DeviceKey], set[DeviceKey]]] = {}
    # One round trip: the overview page counts its queries.
    for claim, driver, pool, device, admin_access in allocations.union(_tainted_devices()):
        if admin_access is None:
            tainted.add((driver, pool, device))
        else:
            found.setdefault(claim, (set(), set()))[1 if admin_access else 0].add(
                (driver, pool, device)
            )
    by_claim = {claim: (frozenset(h), frozenset(a)) for claim, (h, a) in found.items()}
    return _combined(fingerprint, membership, by_claim, frozenset(tainted))


def class_utilisation(
    *, membership: ClassMembership | None = None, holds: Holds | None = None
) -> dict[str, Any]:
    """Per DeviceClass: exact device counts and CEL errors (the `/utilisation/classes/` report).

    Each entry: name; driver (set when the class's only selector is `device.driver == "x"`, for
    old readers); approximate (always false now); method ("cel"); devices (total, allocated,
    shared, admin, tainted, free with the meanings of `claims.devices.counts.pool_device_counts`;
    null when a selector does not compile); cel_errors (devices whose evaluation raised); error
    (the compile error, or the first runtime error, else null). A caller that also counts
    physical units passes the `membership` and `holds` it read for them.
    """
    membership = membership or class_membership()
    held, admin, tainted = holds or held_and_tainted(membership)
    shared = held & membership.multiple
    entries = []
    for name in sorted(membership.drivers):
        found = membership.members.get(name)
        devices: dict[str, int] | None = None
        if found is not None:
            allocated = len(found & held)
            tainted_free = len((found & tainted) - held)
            devices = {
                "total": len(found),
                "allocated": allocated,
                "shared": len(found & shared),
                "admin": len((found & admin) - tainted),
                "tainted": tainted_free,
                "free": len(found) - allocated - tainted_free,
            }
        entries.append(
            {
                "name": name,
                "driver": membership.drivers[name],
                "approximate": False,
                "method": "cel",
                "devices": devices,
                "cel_errors": membership.cel_errors.get(name, 0),
                "error": membership.errors.get(name),
            }
        )
    return {"method": CLASS_METHOD, "classes": entries}


# How far before the kept newest write `written_since` looks (see there).
WRITE_MARGIN = timedelta(seconds=60)


def written_since(
    model: type[M], kept: Fingerprint, now: Fingerprint, *, limit: int, fields: tuple[str, ...] = ()
) -> list[M] | None:
    """The rows of a namespaced `model` written since its table's `kept` state
    (`table_fingerprint`: version, deletes, written_at), found by the indexed synced_at, with
    pk, namespace, name and `fields` read, and those written up to WRITE_MARGIN before the
    kept state's last writer began again. None when a row was deleted meanwhile or more than
    `limit` were read: then the caller reads the table."""
    if kept == now:
        return []
    _, deletes, since = kept
    if deletes != now[1]:
        return None
    rows = model._default_manager.order_by()
    if isinstance(since, datetime):
        # Writers stamp synced_at before they commit, some before their transaction began: a
        # row committed after the kept state was read may carry an older stamp than its
        # writer's start. Rows written up to WRITE_MARGIN before it are read again (reading a
        # row again gives the same result).
        rows = rows.filter(synced_at__gte=since - WRITE_MARGIN)
    changed = list(rows.only("pk", "namespace", "name", *fields)[: limit + 1])
    if len(changed) > limit:
        return None
    return changed
