"""Utilisation of the inventory, computed in the database.

Device states, pool and class counts are SQL annotations and aggregates (no Python loops over
device rows), so list pages and the API stay one query whatever the cluster size. Only quantity
arithmetic (counters and consumable capacity), which SQL cannot do exactly, is done in Python:
once per distinct `consumesCounters` spelling per pool, or for one pool.

Two states need more than SQL, and are added by `refine_device_states` (per device) and
`pool_device_counts` (per pool):

- blocked (`STATE_BLOCKED`): a device that consumes shared counters (a partition, or the whole
  device of a partitionable GPU) and is neither held nor tainted, while the counters its pool has
  left after the held devices' consumption cannot cover what it needs (upstream's counter check:
  every counter of the pool is compared). It is free in the counts (not held, not tainted) but
  cannot be allocated until a holder lets go.
- unhealthy (`DeviceState.UNHEALTHY`): a device whose own taints or a DeviceTaintRule carry
  effect NoExecute, or whose device status in a claim (status.devices[].conditions) has condition
  `Ready` with status `False`. Unhealthy wins over every other state in the grid; in the counts
  it is an extra column (an unhealthy device is still counted as allocated, tainted, ...).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache, reduce
from operator import or_
from typing import Any

from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

from inventory.choices import DeviceState, TaintEffect
from inventory.models import CounterSet, Device, DeviceClass, DeviceTaintRule, Pool

# States that make a device unavailable for a new exclusive allocation.
HELD_STATES = (DeviceState.ALLOCATED, DeviceState.SHARED)
# Free but unallocatable: its shared counters are used up. Belongs in DeviceState
# (inventory/choices.py, not edited here yet); the string is the API's `state` value.
STATE_BLOCKED = "blocked"
CLASS_COUNT_KEYS = ("total", "allocated", "shared", "admin", "tainted", "free")
COUNT_KEYS = ("total", "allocated", "shared", "admin", "tainted", "blocked", "unhealthy", "free")

CLASS_APPROXIMATION = (
    "DeviceClass selectors are CEL expressions; a class whose only selector is "
    '`device.driver == "<driver>"` is counted as every device of that driver, other classes '
    "are not counted (driver is null)."
)

_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"\\]+)"\s*$')


def _allocations() -> QuerySet[Any]:
    from claims.models import AllocatedDevice  # claims builds on inventory, not the other way

    return AllocatedDevice.objects.filter(
        driver=OuterRef("driver"), pool=OuterRef("pool_name"), device=OuterRef("name")
    )


def _rule_taints() -> QuerySet[DeviceTaintRule]:
    # An empty selector field matches every device, as upstream's DeviceTaintSelector does.
    # Taints with effect None are informational and do not keep new claims away.
    return DeviceTaintRule.objects.exclude(taint__effect=TaintEffect.NONE).filter(
        Q(driver="") | Q(driver=OuterRef("driver")),
        Q(pool_name="") | Q(pool_name=OuterRef("pool_name")),
        Q(device_name="") | Q(device_name=OuterRef("name")),
    )


def annotate_device_state(devices: QuerySet[Device]) -> QuerySet[Device]:
    """Add `allocated`, `shared`, `admin_access`, `is_tainted` and `state` columns to devices.

    allocated: a non-admin AllocatedDevice names this driver/pool/device; shared: the device
    allows multiple allocations and has at least one; admin_access: only admin-access allocations
    hold it; is_tainted: its own taints or a DeviceTaintRule. `state` picks one, in the order
    shared, allocated, tainted, admin, free.
    """
    allocations = _allocations()
    devices = devices.annotate(
        allocated=Exists(allocations.filter(admin_access=False)),
        admin_access=Exists(allocations.filter(admin_access=True)),
        rule_tainted=Exists(_rule_taints()),
    )
    return devices.annotate(
        shared=Case(
            When(Q(allow_multiple_allocations=True, allocated=True), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        ),
        is_tainted=Case(
            When(Q(tainted=True) | Q(rule_tainted=True), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        ),
        state=Case(
            When(
                Q(allow_multiple_allocations=True, allocated=True), then=Value(DeviceState.SHARED)
            ),
            When(allocated=True, then=Value(DeviceState.ALLOCATED)),
            When(Q(tainted=True) | Q(rule_tainted=True), then=Value(DeviceState.TAINTED)),
            When(admin_access=True, then=Value(DeviceState.ADMIN)),
            default=Value(DeviceState.FREE),
            output_field=CharField(),
        ),
    )


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
    tainted = Q(tainted=True) | Q(Exists(_rule_taints()))
    admin = Q(Exists(_allocations().filter(admin_access=True)))
    return pools.annotate(
        devices_total=F("device_count"),
        devices_allocated=_pool_count(allocated),
        devices_shared=_pool_count(allocated & Q(allow_multiple_allocations=True)),
        devices_admin=_pool_count(~allocated & ~tainted & admin),
        devices_tainted=_pool_count(~allocated & tainted),
    ).annotate(devices_free=F("devices_total") - F("devices_allocated") - F("devices_tainted"))


def class_driver(device_class: DeviceClass) -> str | None:
    """The driver a class selects when its only selector is `device.driver == "x"`, else None."""
    selectors = device_class.selectors or []
    if len(selectors) != 1:
        return None
    expression = ((selectors[0] or {}).get("cel") or {}).get("expression")
    match = _DRIVER_SELECTOR.match(expression) if isinstance(expression, str) else None
    return match.group(1) if match else None


def _rule_match(rule: DeviceTaintRule) -> Q:
    # An empty selector field matches every device, as upstream's DeviceTaintSelector does.
    fields = {"driver": rule.driver, "pool_name": rule.pool_name, "name": rule.device_name}
    chosen = {field: value for field, value in fields.items() if value}
    return Q(**chosen) if chosen else Q(pk__isnull=False)


def _effective_rules() -> list[DeviceTaintRule]:
    """DeviceTaintRules whose taint keeps claims away (few: loaded, then used as static Q)."""
    return list(
        DeviceTaintRule.objects.exclude(taint__effect=TaintEffect.NONE).only(
            "pk", "driver", "pool_name", "device_name", "taint"
        )
    )


def _no_execute(taints: Any) -> bool:
    return any(
        isinstance(t, Mapping) and t.get("effect") == TaintEffect.NO_EXECUTE for t in taints or []
    )


def _not_ready(conditions: Any) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "False"
        for c in conditions or []
    )


@lru_cache(maxsize=4096)
def _exact(text: str) -> Fraction | None:
    try:
        return _quantity(text).exact
    except (TypeError, ValueError):
        return None  # a malformed amount constrains nothing; the sync reports the object


@lru_cache(maxsize=4096)
def _consumption(spelling: str) -> Mapping[tuple[str, str], Fraction]:
    """What one `consumesCounters` list (as stored JSON text) takes, per counter set and counter."""
    need: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    entries = json.loads(spelling) if spelling else []
    for entry in entries if isinstance(entries, list) else []:
        counters = entry.get("counters") if isinstance(entry, Mapping) else None
        for counter, amount in (counters or {}).items():
            value = _exact(str((amount or {}).get("value", "0")))
            if value is not None:
                need[(str(entry.get("counterSet", "")), str(counter))] += value
    return dict(need)


def _pool_counters(pool_ids: Iterable[int]) -> dict[int, dict[tuple[str, str], Fraction]]:
    """Per pool id: every counter of its current counter sets."""
    wanted = set(pool_ids)
    counters: dict[int, dict[tuple[str, str], Fraction]] = {pool_id: {} for pool_id in wanted}
    if not wanted:
        return counters
    # All current sets as text (a few milliseconds) beats an IN list of thousands of pools;
    # the spellings repeat, so each is parsed once.
    sets = CounterSet.objects.filter(slice__current=True).annotate(
        spelling=Cast("counters", TextField())
    )
    for pool_id, set_name, spelling in sets.values_list("pool_id", "name", "spelling"):
        if pool_id in wanted:
            for counter, value in _counter_amounts(spelling):
                counters[pool_id][(set_name, counter)] = value
    return counters


@lru_cache(maxsize=1024)
def _counter_amounts(spelling: str) -> tuple[tuple[str, Fraction], ...]:
    counters = json.loads(spelling) if spelling else {}
    amounts = []
    for counter, amount in (counters if isinstance(counters, dict) else {}).items():
        value = _exact(str((amount or {}).get("value", "0")) if isinstance(amount, dict) else "")
        if value is not None:
            amounts.append((str(counter), value))
    return tuple(amounts)


def _available_counters(
    held: Iterable[tuple[int, str]],
) -> dict[int, dict[tuple[str, str], Fraction]]:
    """Per pool id: its counters minus what held devices (pool id, consumesCounters text) take.

    Only pools that have a held counter consumer are returned: elsewhere nothing is blocked.
    """
    held = list(held)
    available = _pool_counters(pool_id for pool_id, _ in held)
    for pool_id, spelling in held:
        left = available[pool_id]
        for key, value in _consumption(spelling).items():
            if key in left:  # upstream skips counters its pool does not declare
                left[key] -= value
    return available


def _exceeds(available: Mapping[tuple[str, str], Fraction], spelling: str) -> bool:
    # As upstream's allocator: every counter of the pool is compared, not only the touched ones,
    # so a counter already overdrawn by the holders blocks every consumer of the pool.
    need = _consumption(spelling)
    if any(key in available and available[key] < value for key, value in need.items()):
        return True
    return any(left.numerator < 0 for key, left in available.items() if key not in need)


def _held_spellings(devices: QuerySet[Device]) -> list[tuple[int, str]]:
    """(pool id, consumesCounters text) of held devices that consume counters."""
    consumers = devices.exclude(consumes_counters=[]).filter(
        Exists(_allocations().filter(admin_access=False))
    )
    spellings = consumers.annotate(spelling=Cast("consumes_counters", TextField()))
    return list(spellings.values_list("pool_id", "spelling"))


def pool_device_counts(
    pools: QuerySet[Pool] | None = None, *, refine: bool = True
) -> dict[tuple[str, str], dict[str, int]]:
    """Device counts of the current generation per (driver, pool): the one place that says
    what is allocated, tainted, blocked and unhealthy in aggregate (overview, metrics, samples).

    Keys: total; allocated (held by a non admin-access allocation) of which shared (the device
    allows multiple allocations); tainted (not held, NoSchedule/NoExecute); free = total -
    allocated - tainted; admin (free, held by admin-access allocations only) and blocked (free,
    not admin, its counters exhausted) are parts of free; unhealthy overlaps the others.
    Grouped queries counted from the allocation side, so the number of queries and the per-row
    work stay flat as devices grow. `refine=False` leaves blocked and unhealthy at 0 (and saves
    their five queries) for callers that do not report them.
    """
    from claims.models import AllocatedDevice

    devices = Device.objects.filter(current=True)
    if pools is not None:
        devices = devices.filter(pool__in=pools)
    # The few rules become a static condition: a rule subquery per device costs far more.
    rules = _effective_rules()
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
    named = devices.filter(
        driver=OuterRef("driver"), pool_name=OuterRef("pool"), name=OuterRef("device")
    )
    same_device = AllocatedDevice.objects.filter(
        driver=OuterRef("driver"), pool=OuterRef("pool"), device=OuterRef("device")
    )
    # Counted from the allocation side: thousands of allocations, not tens of thousands of
    # devices each asking whether it is allocated.
    held = (
        AllocatedDevice.objects.filter(Exists(named))
        .order_by()
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
    if not refine:
        return dict(counts)
    _count_blocked(counts, devices=devices, tainted=tainted)
    for driver, pool_name, _ in _unhealthy_keys(devices, rules=rules):
        counts[(driver, pool_name)]["unhealthy"] += 1
    return dict(counts)


def _count_blocked(
    counts: dict[tuple[str, str], dict[str, int]], *, devices: QuerySet[Device], tainted: Q
) -> None:
    consumers = (
        devices.exclude(consumes_counters=[])
        .exclude(tainted)
        .annotate(spelling=Cast("consumes_counters", TextField()))
    )
    # Devices with any allocation are few: fetch them one by one and take them out of the
    # grouped counts, instead of testing every device for allocations in the grouped query.
    allocated = list(
        consumers.filter(Exists(_allocations())).values_list(
            "pool_id", "spelling", Exists(_allocations().filter(admin_access=False))
        )
    )
    available = _available_counters((pool, text) for pool, text, held in allocated if held)
    if not available:
        return
    taken: dict[tuple[int, str], int] = defaultdict(int)
    for pool_id, spelling, _ in allocated:
        taken[(pool_id, spelling)] += 1
    # Partitions repeat a few consumesCounters spellings per pool: group by the spelling so the
    # quantity check runs once per spelling and pool, not once per device.
    groups = (
        consumers.filter(pool_id__in=list(available))
        .order_by()
        .values("pool_id", "driver", "pool_name", "spelling")
        .annotate(n=Count("pk"))
    )
    for row in groups:
        free = row["n"] - taken.get((row["pool_id"], row["spelling"]), 0)
        if free and _exceeds(available[row["pool_id"]], row["spelling"]):
            counts[(row["driver"], row["pool_name"])]["blocked"] += free


def _unhealthy_keys(
    devices: QuerySet[Device], *, rules: list[DeviceTaintRule]
) -> set[tuple[str, str, str]]:
    """driver/pool/device of unhealthy devices: NoExecute taints, or a claim's device status
    with condition Ready=False."""
    from claims.models import AllocatedDevice

    evicting = [_rule_match(rule) for rule in rules if _no_execute([rule.taint])]
    ruled = reduce(or_, evicting) if evicting else Q(pk__isnull=True)
    flagged = Case(When(ruled, then=Value(True)), default=Value(False), output_field=BooleanField())
    tainted = devices.filter(Q(tainted=True) | ruled).values_list(
        "driver", "pool_name", "name", "taints", flagged
    )
    keys = {(d, p, n) for d, p, n, taints, rule in tainted if rule or _no_execute(taints)}
    named = devices.filter(
        driver=OuterRef("driver"), pool_name=OuterRef("pool"), name=OuterRef("device")
    )
    reported = (
        AllocatedDevice.objects.exclude(conditions=[])
        .filter(Exists(named))
        .values_list("driver", "pool", "device", "conditions")
    )
    keys.update((d, p, n) for d, p, n, conditions in reported if _not_ready(conditions))
    return keys


def refine_device_states(devices: Sequence[Device]) -> None:
    """Add `blocked`, `unhealthy` and `effective_state` to devices from `annotate_device_state`:
    `state` unless unhealthy (wins over all) or blocked (instead of free). `state` itself stays
    the SQL column that filters and ordering use. A fixed number of queries for any list.

    The devices need `pool_id`, `consumes_counters` and `taints` loaded.
    """
    from claims.models import AllocatedDevice

    if not devices:
        return
    pool_ids = sorted({device.pool_id for device in devices})
    scope = Device.objects.filter(current=True, pool_id__in=pool_ids)
    candidates = {
        d.pk for d in devices if d.consumes_counters and d.state == DeviceState.FREE and d.current
    }
    available = _available_counters(_held_spellings(scope)) if candidates else {}
    rules = [r for r in _effective_rules() if _no_execute([r.taint])]
    pools = {(d.driver, d.pool_name) for d in devices}
    reports = AllocatedDevice.objects.exclude(conditions=[]).filter(
        reduce(or_, (Q(driver=driver, pool=pool) for driver, pool in pools))
    )
    not_ready = {
        (d, p, n)
        for d, p, n, conditions in reports.values_list("driver", "pool", "device", "conditions")
        if _not_ready(conditions)
    }
    for device in devices:
        key = (device.driver, device.pool_name, device.name)
        left = available.get(device.pool_id)
        spelling = json.dumps(device.consumes_counters or [])
        device.blocked = device.pk in candidates and left is not None and _exceeds(left, spelling)
        device.unhealthy = (
            key in not_ready
            or _no_execute(device.taints)
            or any(_rule_applies(rule, device) for rule in rules)
        )
        device.effective_state = (
            DeviceState.UNHEALTHY
            if device.unhealthy
            else STATE_BLOCKED
            if device.blocked
            else device.state
        )


def _rule_applies(rule: DeviceTaintRule, device: Device) -> bool:
    return all(
        not wanted or wanted == value
        for wanted, value in (
            (rule.driver, device.driver),
            (rule.pool_name, device.pool_name),
            (rule.device_name, device.name),
        )
    )


def driver_utilisation(drivers: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Current device counts per driver, the sums of `pool_device_counts` (same keys)."""
    wanted = None if drivers is None else set(drivers)
    result: dict[str, dict[str, int]] = {}
    for (driver, _), counts in sorted(pool_device_counts().items()):
        if wanted is not None and driver not in wanted:
            continue
        totals = result.setdefault(driver, dict.fromkeys(COUNT_KEYS, 0))
        for key, value in counts.items():
            totals[key] += value
    return result


def class_utilisation() -> dict[str, Any]:
    """Per DeviceClass: the driver it selects (approximated, see `method`) and device counts."""
    classes = list(DeviceClass.objects.only("pk", "name", "selectors").order_by("name"))
    drivers = {device_class.pk: class_driver(device_class) for device_class in classes}
    counts = driver_utilisation({d for d in drivers.values() if d})
    entries = []
    for device_class in classes:
        driver = drivers[device_class.pk]
        found = counts.get(driver, {}) if driver else None
        entries.append(
            {
                "name": device_class.name,
                "driver": driver,
                "approximate": driver is not None,
                # The class report keeps its published keys; blocked/unhealthy are per driver.
                "devices": (
                    {key: found.get(key, 0) for key in CLASS_COUNT_KEYS}
                    if found is not None
                    else None
                ),
            }
        )
    return {"method": CLASS_APPROXIMATION, "classes": entries}


def _quantity(text: Any) -> Any:
    from claims.allocator.quantity import parse_quantity  # pure library, no Django

    return parse_quantity(str(text))


def _held_keys(driver: str, pool_name: str) -> set[str]:
    from claims.models import AllocatedDevice

    return set(
        AllocatedDevice.objects.filter(driver=driver, pool=pool_name, admin_access=False)
        .values_list("device", flat=True)
        .distinct()
    )


def counter_usage(pool: Pool) -> list[dict[str, Any]]:
    """sharedCounters of a pool's current slices: capacity, consumed by allocated devices, left.

    One entry per counter set and counter, quantities as canonical strings.
    """
    counter_sets = pool.counter_sets.filter(slice__current=True).order_by("name")
    held = _held_keys(pool.driver, pool.name)
    consumed: dict[tuple[str, str], Any] = {}
    devices = pool.devices.filter(current=True, name__in=held).values_list(
        "consumes_counters", flat=True
    )
    for consumes in devices:
        for entry in consumes or []:
            for counter, amount in (entry.get("counters") or {}).items():
                key = (str(entry.get("counterSet", "")), str(counter))
                value = _quantity((amount or {}).get("value", "0"))
                consumed[key] = consumed[key].add(value) if key in consumed else value
    zero = _quantity("0")
    usage: list[dict[str, Any]] = []
    for counter_set in counter_sets:
        for counter, amount in sorted((counter_set.counters or {}).items()):
            capacity = _quantity((amount or {}).get("value", "0"))
            used = consumed.get((counter_set.name, counter), zero)
            usage.append(
                {
                    "counter_set": counter_set.name,
                    "counter": counter,
                    "capacity": str(capacity),
                    "consumed": str(used),
                    "available": str(capacity.sub(used)),
                }
            )
    return usage


def capacity_usage(device: Device) -> list[dict[str, Any]]:
    """Consumable capacity of one device against the consumedCapacity of its allocations."""
    return capacity_usages([device])[device.pk]


def capacity_usages(devices: Sequence[Device]) -> dict[int, list[dict[str, Any]]]:
    """`capacity_usage` of many devices by pk, in one query for all their allocations."""
    from claims.models import AllocatedDevice

    if not devices:
        return {}
    pools = {(device.driver, device.pool_name) for device in devices}
    names = {device.name for device in devices}
    shares: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    allocations = AllocatedDevice.objects.filter(
        reduce(or_, (Q(driver=driver, pool=pool) for driver, pool in pools)),
        device__in=names,
        admin_access=False,
    ).values_list("driver", "pool", "device", "consumed_capacity")
    for driver, pool, name, consumed_capacity in allocations:
        shares[(driver, pool, name)].append(consumed_capacity or {})
    return {
        device.pk: _capacity_rows(
            device, shares.get((device.driver, device.pool_name, device.name), [])
        )
        for device in devices
    }


def _capacity_rows(device: Device, shares: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    consumed: dict[str, Any] = {}
    for entry in shares:
        for name, amount in entry.items():
            value = _quantity(amount)
            consumed[name] = consumed[name].add(value) if name in consumed else value
    zero = _quantity("0")
    # Without allowMultipleAllocations an allocation takes the whole device, capacity and all.
    exclusive = bool(shares) and not device.allow_multiple_allocations
    usage: list[dict[str, Any]] = []
    capacity: Mapping[str, Any] = device.capacity or {}
    for name, spec in sorted(capacity.items()):
        total = _quantity((spec or {}).get("value", "0"))
        used = total if exclusive else consumed.get(name, zero)
        usage.append(
            {
                "capacity": name,
                "value": str(total),
                "consumed": str(used),
                "available": str(total.sub(used)),
                "allocations": len(shares),
            }
        )
    return usage
