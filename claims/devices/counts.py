"""Device counts per pool, driver and DeviceClass, as grouped queries (see `states` for what
each state means).

Every pool's counts are computed at once and kept in process memory until the slices, classes,
claims, DeviceTaintRules or pods move (`_kept_counts`, one small query says whether they did), so
the overview, pool-status and the per-pool metrics read 10,000 pools' counts without reading
100,000 devices; a web process computes them at start (`warm_counts`). A change then costs what
it touched: the pods written since are read for their health reports alone, and the claims
written since have only the pools they held or hold counted again (`written_since`, by the
indexed synced_at); a deletion, or a slice, class or taint rule change, counts everything."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from claims.devices.availability import (
    class_availability,
    overdrawn_consumers,
    unit_index,
    warm_units,
)
from claims.devices.classes import (
    Holds,
    class_membership,
    held_and_tainted,
    table_fingerprint,
    written_since,
)
from claims.devices.health import unhealthy_keys_of
from claims.devices.states import (
    _allocations,
    _effective_rules,
    _no_execute,
    _not_ready,
    _rule_match,
    rule_taints,
)
from claims.devices.stored_counts import (
    Stored,
    counts_digest,
    read_stored_counts,
    store_counts,
)
from claims.models import AllocatedDevice, Pod, ResourceClaim
from dashboard.kept import Kept
from inventory.models import Device, DeviceClass, DeviceTaintRule, Pool, ResourceSlice

CLASS_COUNT_KEYS = ("total", "allocated", "shared", "admin", "tainted", "free")
COUNT_KEYS = ("total", "allocated", "shared", "admin", "tainted", "blocked", "unhealthy", "free")


def available_count(counts: dict[str, int]) -> int:
    """Devices a new claim could get now: not held, not tainted, not blocked by counters.

    The parts of a device count are then disjoint: total = allocated + tainted + blocked +
    available. `free` (total - allocated - tainted) keeps its API meaning and includes blocked;
    admin (held by admin access only, which takes nothing) is part of available, and unhealthy
    overlaps the others.
    """
    return max(0, counts.get("free", 0) - counts.get("blocked", 0))


def _pool_count(condition: Q) -> Coalesce:
    devices = Device.objects.filter(condition, pool=OuterRef("pk"), current=True)
    counted = devices.order_by().values("pool").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted[:1], output_field=IntegerField()), 0)


def pool_utilisation(pools: QuerySet[Pool]) -> QuerySet[Pool]:
    """Annotate pools with device counts of their current generation.

    Columns: devices_total, devices_allocated (exclusive or shared), devices_shared,
    devices_admin, devices_tainted (tainted and not held) and devices_free (neither held nor
    tainted; admin-access use does not take a device). The conditions are those of
    `annotate_device_state`, spelled out so each count evaluates only the checks it needs.
    """
    allocated = Q(Exists(_allocations().filter(admin_access=False)))
    tainted = Q(tainted=True) | Q(Exists(rule_taints()))
    admin = Q(Exists(_allocations().filter(admin_access=True)))
    return pools.annotate(
        devices_total=F("device_count"),
        devices_allocated=_pool_count(allocated),
        devices_shared=_pool_count(allocated & Q(allow_multiple_allocations=True)),
        devices_admin=_pool_count(~allocated & ~tainted & admin),
        devices_tainted=_pool_count(~allocated & tainted),
    ).annotate(devices_free=F("devices_total") - F("devices_allocated") - F("devices_tainted"))


PoolKey = tuple[str, str]
DeviceKey = tuple[str, str, str]


@dataclass(frozen=True)
class _ClaimSide:
    """What the counts owe to slices, classes, claims and DeviceTaintRules, as of
    `fingerprint`: every pool's counts but `unhealthy`, and the devices unhealthy by a NoExecute
    taint or a claim's Ready=False condition. Pods move none of it."""

    fingerprint: tuple[Any, ...]
    counts: Mapping[PoolKey, Mapping[str, int]]
    flagged: frozenset[DeviceKey]
    # Per claim, the pools its allocations name: what a change of the claim may move.
    pools_of: Mapping[int, frozenset[PoolKey]]


@dataclass(frozen=True)
class _PodReports:
    """Per pod that reports devices Unhealthy, their keys, as of `fingerprint` (the Pod
    table's version, `inventory.versions`)."""

    fingerprint: tuple[Any, ...]
    keys: Mapping[int, frozenset[DeviceKey]]


@dataclass(frozen=True)
class _KeptCounts:
    """The counts of every pool, and per pool its unhealthy devices that are neither held nor
    tainted, as of `fingerprint` (the claim side's and the pod reports'), with the two sides
    they were made of (what the next computation follows)."""

    fingerprint: tuple[Any, ...]
    counts: Mapping[PoolKey, Mapping[str, int]]
    unhealthy_unavailable: Mapping[PoolKey, int]
    claim_side: _ClaimSide
    reports: _PodReports


_kept: Kept[_KeptCounts] = Kept()


def forget_counts() -> None:
    """Drop the kept counts (tests; the fingerprint normally makes this unnecessary)."""
    _kept.forget()


def _kept_counts(holds: Holds | None = None, *, store: bool = False) -> _KeptCounts:
    """Every pool's counts, computed again only when what they follow moves, and only the part
    that follows it: the slices, classes, claims and DeviceTaintRules (`_claim_side_at`), or the
    pods' health reports (`_pod_reports`, read again only for the pods written since). Two small
    queries say whether anything did; a page then reads the counts of 10,000 pools without
    reading 100,000 devices, and a pod's change costs what that pod reports.

    A new process takes the counts an earlier one stored at the same table versions
    (`stored_counts`); with `store` (the warm-up), counts computed while no table moved are
    stored for the next one."""
    membership = class_membership()
    # One round trip for the three tables; each side follows its own.
    tables = table_fingerprint(ResourceClaim, DeviceTaintRule, Pod)
    claim_fingerprint = (membership.fingerprint, tables[3:6], tables[:3])
    pod_fingerprint = tables[6:]
    fingerprint = (claim_fingerprint, pod_fingerprint)

    def compute(previous: _KeptCounts | None) -> _KeptCounts:
        digest = None
        if previous is None or store:
            digest = counts_digest(fingerprint, membership.classes_digest)
        if previous is None and digest is not None:
            stored = read_stored_counts(digest)
            if stored is not None:
                return _from_stored(fingerprint, stored)
        kept = _computed(previous)
        if store and digest is not None and _unmoved(membership.fingerprint + tables):
            store_counts(digest, _to_stored(kept))
        return kept

    def _computed(previous: _KeptCounts | None) -> _KeptCounts:
        devices = Device.objects.filter(current=True)
        rules = _effective_rules()
        side = _claim_side_at(
            claim_fingerprint,
            None if previous is None else previous.claim_side,
            holds=holds,
            rules=rules,
        )
        reports = _pod_reports(pod_fingerprint, None if previous is None else previous.reports)
        unhealthy = set(side.flagged)
        unhealthy.update(_present(devices, reports))
        counts = {key: dict(entry) for key, entry in side.counts.items()}
        for driver, pool_name, _ in unhealthy:
            counts.setdefault((driver, pool_name), dict.fromkeys(COUNT_KEYS, 0))["unhealthy"] += 1
        return _KeptCounts(
            fingerprint=fingerprint,
            counts=counts,
            unhealthy_unavailable=_unavailable(devices, unhealthy, rules=rules),
            claim_side=side,
            reports=reports,
        )

    return _kept.get(fingerprint, compute)


def _unmoved(read_at: tuple[Any, ...]) -> bool:
    # Nothing committed while the counts were computed: they are those of these versions.
    now = table_fingerprint(ResourceSlice, DeviceClass, ResourceClaim, DeviceTaintRule, Pod)
    return now == read_at


def _from_stored(fingerprint: tuple[Any, ...], stored: Stored) -> _KeptCounts:
    claim_fingerprint, pod_fingerprint = fingerprint
    return _KeptCounts(
        fingerprint=fingerprint,
        counts=stored.counts,
        unhealthy_unavailable=stored.unavailable,
        claim_side=_ClaimSide(
            fingerprint=claim_fingerprint,
            counts=stored.side_counts,
            flagged=stored.flagged,
            pools_of=stored.pools_of,
        ),
        reports=_PodReports(fingerprint=pod_fingerprint, keys=stored.reports),
    )


def _to_stored(kept: _KeptCounts) -> Stored:
    return Stored(
        counts={key: dict(entry) for key, entry in kept.counts.items()},
        unavailable=dict(kept.unhealthy_unavailable),
        side_counts={key: dict(entry) for key, entry in kept.claim_side.counts.items()},
        flagged=kept.claim_side.flagged,
        pools_of=dict(kept.claim_side.pools_of),
        reports=dict(kept.reports.keys),
    )


# More claims or pods changed than this since the last computation: it is done whole.
_FEW_CHANGES = 200


def _claim_side_at(
    fingerprint: tuple[Any, ...],
    kept: _ClaimSide | None,
    *,
    holds: Holds | None,
    rules: list[DeviceTaintRule],
) -> _ClaimSide:
    """The claim side as of `fingerprint`. When only claims moved since `kept` (none deleted,
    few written), only the pools the written claims held before or hold now are counted again,
    and `blocked` (the counters of every pool, from the kept units and holds) over all pools;
    else everything."""
    if kept is not None and kept.fingerprint == fingerprint:
        return kept
    devices = Device.objects.filter(current=True)
    changed = None
    if kept is not None and kept.fingerprint[:2] == fingerprint[:2]:
        changed = written_since(
            ResourceClaim, kept.fingerprint[2], fingerprint[2], limit=_FEW_CHANGES
        )
    if kept is None or changed is None:
        return _ClaimSide(
            fingerprint=fingerprint,
            counts=_compute_counts(holds=holds, rules=rules),
            flagged=frozenset(_flagged_keys(devices, rules=rules)),
            pools_of=_pools_held(None),
        )
    claims = {claim.pk for claim in changed}
    now = _pools_held(claims)
    pools_of = {pk: pools for pk, pools in kept.pools_of.items() if pk not in claims}
    pools_of.update(now)
    touched = set().union(*(kept.pools_of.get(pk, ()) for pk in claims), *now.values())
    counts = {key: dict(entry) for key, entry in kept.counts.items() if key not in touched}
    if touched:
        counts.update(_compute_counts(holds=holds, rules=rules, pools=touched))
    for entry in counts.values():
        entry["blocked"] = 0
    _count_blocked(counts, holds=holds)
    return _ClaimSide(
        fingerprint=fingerprint,
        counts=counts,
        flagged=frozenset(_flagged_keys(devices, rules=rules)),
        pools_of=pools_of,
    )


def _pools_held(claims: set[int] | None) -> dict[int, frozenset[PoolKey]]:
    """Per claim (of `claims`, or every one), the pools its allocations name."""
    entries = AllocatedDevice.objects.order_by()
    if claims is not None:
        entries = entries.filter(claim_id__in=sorted(claims))
    pools: dict[int, set[PoolKey]] = defaultdict(set)
    for claim, driver, pool in entries.values_list("claim_id", "driver", "pool").distinct():
        pools[claim].add((driver, pool))
    return {claim: frozenset(held) for claim, held in pools.items()}


def _pod_reports(fingerprint: tuple[Any, ...], kept: _PodReports | None) -> _PodReports:
    """The pods' Unhealthy reports as of `fingerprint`. From `kept`, only the pods written
    since are read (`written_since`), when none was deleted and few changed; else every
    reporting pod is read."""
    if kept is not None and kept.fingerprint == fingerprint:
        return kept
    fields = ("pk", "phase", "resource_health")
    changed = None
    if kept is not None:
        changed = written_since(
            Pod, kept.fingerprint, fingerprint, limit=_FEW_CHANGES, fields=fields
        )
    if kept is not None and changed is not None:
        keys = dict(kept.keys)
        for pod in changed:
            found = unhealthy_keys_of(pod)
            if found:
                keys[pod.pk] = found
            else:
                keys.pop(pod.pk, None)
        return _PodReports(fingerprint=fingerprint, keys=keys)
    reporting = Pod.objects.exclude(resource_health=[]).only(*fields)
    found_keys = {pod.pk: unhealthy_keys_of(pod) for pod in reporting}
    return _PodReports(
        fingerprint=fingerprint, keys={pk: keys for pk, keys in found_keys.items() if keys}
    )


def _present(devices: QuerySet[Device], reports: _PodReports) -> set[DeviceKey]:
    """The reported keys that name a current device (the few reported ones, by name)."""
    reported = set().union(*reports.keys.values()) if reports.keys else set()
    if not reported:
        return set()
    names = sorted({name for _, _, name in reported})
    present: set[DeviceKey] = set()
    for start in range(0, len(names), 500):
        part = devices.filter(name__in=names[start : start + 500])
        present.update(part.values_list("driver", "pool_name", "name"))
    return present & reported


_warming = threading.Event()


def warming() -> bool:
    """Whether `warm_counts` is under way: a scrape then leaves out what it computes rather
    than wait for it (Prometheus would see the scrape take seconds)."""
    return _warming.is_set()


def warm_counts() -> None:
    """`availability.warm_units` (class membership, units, holds), then every pool's counts:
    what a web process computes in the background at start, so that neither the first
    overview nor the first scrape pays for it."""
    _warming.set()
    try:
        warm_units()
        _kept_counts(store=True)
        # Counts taken as stored did not check the pools' counters, which the availability
        # of the first overview needs (60 ms at 5,000 nodes): checked here instead.
        class_availability()
    finally:
        _warming.clear()


def _chosen(pools: QuerySet[Pool] | None) -> set[PoolKey] | None:
    return None if pools is None else set(pools.values_list("driver", "name"))


def pool_device_counts(
    pools: QuerySet[Pool] | None = None, *, refine: bool = True, holds: Holds | None = None
) -> dict[tuple[str, str], dict[str, int]]:
    """Device counts of the current generation per (driver, pool): the one place that says
    what is allocated, tainted, blocked and unhealthy in aggregate (overview, metrics, samples).

    Keys: total; allocated (held by a non admin-access allocation) of which shared (the device
    allows multiple allocations); tainted (not held, NoSchedule/NoExecute); free = total -
    allocated - tainted; admin (free, held by admin-access allocations only) and blocked (free,
    not admin, its counters exhausted) are parts of free; unhealthy overlaps the others.
    Counted for every pool at once and kept in process memory until the cluster changes
    (`_kept_counts`), so a page costs two small queries plus one for the `pools` it names.
    `refine=False` reports blocked and unhealthy as 0, for callers that do not report them; a
    caller that read the `holds` (claims.devices.classes.held_and_tainted) passes them.
    """
    kept = _kept_counts(holds)
    chosen = _chosen(pools)
    result: dict[tuple[str, str], dict[str, int]] = {}
    for key, counts in kept.counts.items():
        if chosen is not None and key not in chosen:
            continue
        row = dict(counts)
        if not refine:
            row["blocked"] = row["unhealthy"] = 0
        result[key] = row
    return result


def unavailable_unhealthy(pools: QuerySet[Pool] | None = None) -> dict[tuple[str, str], int]:
    """Per pool: unhealthy devices that are neither allocated nor tainted (the tainted ones are
    already unavailable), kept with the counts."""
    kept = _kept_counts()
    chosen = _chosen(pools)
    return {
        key: count
        for key, count in kept.unhealthy_unavailable.items()
        if chosen is None or key in chosen
    }


def _unavailable(
    devices: QuerySet[Device], keys: set[tuple[str, str, str]], *, rules: list[DeviceTaintRule]
) -> dict[PoolKey, int]:
    """Per pool: of the unhealthy `keys`, those neither held nor tainted (few: flat queries)."""
    if not keys:
        return {}
    names = {name for _, _, name in keys}
    held = set(
        AllocatedDevice.objects.filter(admin_access=False, device__in=names).values_list(
            "driver", "pool", "device"
        )
    )
    ruled = reduce(or_, (_rule_match(rule) for rule in rules), Q(tainted=True))
    tainted = set(devices.filter(ruled, name__in=names).values_list("driver", "pool_name", "name"))
    extra: dict[PoolKey, int] = defaultdict(int)
    for key in keys - held - tainted:
        extra[(key[0], key[1])] += 1
    return dict(extra)


def _compute_counts(
    *,
    holds: Holds | None,
    rules: list[DeviceTaintRule],
    pools: set[PoolKey] | None = None,
) -> dict[tuple[str, str], dict[str, int]]:
    """Grouped queries counted from the allocation side, so the number of queries and the
    per-row work stay flat as devices grow; of the few `pools` only, when given (then without
    `blocked`, which the caller counts over every pool)."""
    current = devices = Device.objects.filter(current=True)
    allocations = AllocatedDevice.objects.all()
    if pools is not None:
        devices = devices.filter(
            reduce(or_, (Q(driver=d, pool_name=p) for d, p in sorted(pools)), Q(pk__in=[]))
        )
        allocations = allocations.filter(
            reduce(or_, (Q(driver=d, pool=p) for d, p in sorted(pools)), Q(pk__in=[]))
        )
    # The few rules become a static condition: a rule subquery per device costs far more.
    tainted = reduce(or_, (_rule_match(rule) for rule in rules), Q(tainted=True))
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(COUNT_KEYS, 0)
    )
    # `tainted` first: SQLite evaluates the allocation check only for the few tainted devices.
    not_held = ~Q(Exists(_allocations().filter(admin_access=False)))
    totals = (
        devices.order_by()
        .values("driver", "pool_name")
        .annotate(n=Count("pk"), tainted=Count("pk", filter=tainted & not_held))
    )
    for row in totals:
        entry = counts[(row["driver"], row["pool_name"])]
        entry["total"], entry["tainted"] = row["n"], row["tainted"]
    # Matched on the device's key alone, never through the pool filter: PostgreSQL planned an
    # EXISTS over an IN list of 1,800 pools per allocation badly (minutes on a fresh table).
    named = current.filter(
        driver=OuterRef("driver"), pool_name=OuterRef("pool"), name=OuterRef("device")
    )
    same_device = AllocatedDevice.objects.filter(
        driver=OuterRef("driver"), pool=OuterRef("pool"), device=OuterRef("device")
    )
    # Counted from the allocation side: thousands of allocations, not tens of thousands of
    # devices each asking whether it is allocated.
    allocations = allocations.filter(Exists(named))
    held = (
        allocations.order_by()
        .values("driver", "pool")
        .annotate(
            allocated=Count("device", distinct=True, filter=Q(admin_access=False)),
            shared=Count(
                "device",
                distinct=True,
                filter=Q(admin_access=False)
                & Q(Exists(named.filter(allow_multiple_allocations=True))),
            ),
            admin=Count(
                "device",
                distinct=True,
                filter=Q(admin_access=True)
                & ~Q(Exists(same_device.filter(admin_access=False)))
                & Q(Exists(named.exclude(tainted))),
            ),
        )
    )
    for row in held:
        entry = counts[(row["driver"], row["pool"])]
        entry["allocated"], entry["shared"] = row["allocated"], row["shared"]
        entry["admin"] = row["admin"]
    for entry in counts.values():
        entry["free"] = entry["total"] - entry["allocated"] - entry["tainted"]
    if pools is None:
        _count_blocked(counts, holds=holds)
    return dict(counts)


def _count_blocked(counts: dict[tuple[str, str], dict[str, int]], *, holds: Holds | None) -> None:
    """Blocked devices per pool: consumers that nothing holds (not even admin access) and that
    are not tainted, which the counters their pool has left after the holders cannot cover.
    Read from the physical units kept for availability (claims.devices.availability: the
    consumers, their spellings and their pools' counters, kept until the slices change) and
    the holds, not by grouped queries over every consumer: seconds at 5,000 nodes."""
    membership = class_membership()
    held, admin, tainted = holds or held_and_tainted(membership)
    index = unit_index(membership)
    blocked = overdrawn_consumers(index, held) - held - admin - tainted
    for pk in blocked:
        unit = index.units[index.unit_of[pk]]
        counts[(unit.driver, unit.pool)]["blocked"] += 1


def _flagged_keys(
    devices: QuerySet[Device], *, rules: list[DeviceTaintRule]
) -> set[tuple[str, str, str]]:
    """driver/pool/device of devices unhealthy by a NoExecute taint or a claim's device status
    with condition Ready=False; a running pod reporting one Unhealthy is `_pod_reports`'."""

    evicting = [_rule_match(rule) for rule in rules if _no_execute([rule.taint])]
    ruled = reduce(or_, evicting) if evicting else Q(pk__isnull=True)
    flagged = Case(When(ruled, then=Value(True)), default=Value(False), output_field=BooleanField())
    tainted = devices.filter(Q(tainted=True) | ruled).values_list(
        "driver", "pool_name", "name", "taints", flagged
    )
    keys = {(d, p, n) for d, p, n, taints, rule in tainted if rule or _no_execute(taints)}
    # As in pool_device_counts: the device's key alone in the EXISTS, the pools after it.
    named = Device.objects.filter(
        current=True, driver=OuterRef("driver"), pool_name=OuterRef("pool"), name=OuterRef("device")
    )
    reported = (
        AllocatedDevice.objects.exclude(conditions=[])
        .filter(Exists(named))
        .values_list("driver", "pool", "device", "conditions")
    )
    not_ready = [(d, p, n) for d, p, n, conditions in reported if _not_ready(conditions)]
    if not_ready:
        pools = set(devices.order_by().values_list("driver", "pool_name").distinct())
        keys.update(key for key in not_ready if key[:2] in pools)
    return keys


def driver_utilisation(
    drivers: Iterable[str] | None = None, *, holds: Holds | None = None
) -> dict[str, dict[str, int]]:
    """Current device counts per driver, the sums of `pool_device_counts` (same keys)."""
    wanted = None if drivers is None else set(drivers)
    result: dict[str, dict[str, int]] = {}
    for (driver, _), counts in sorted(pool_device_counts(holds=holds).items()):
        if wanted is not None and driver not in wanted:
            continue
        totals = result.setdefault(driver, dict.fromkeys(COUNT_KEYS, 0))
        for key, value in counts.items():
            totals[key] += value
    return result
