"""Device states: the SQL state columns, and the blocked and unhealthy refinements.

Device states, pool and class counts are SQL annotations and aggregates (no Python loops over
device rows), so list pages and the API stay one query whatever the cluster size. Only quantity
arithmetic (counters and consumable capacity), which SQL cannot do exactly, is done in Python:
once per distinct `consumesCounters` spelling per pool, or for one pool.

Two states need more than SQL, and are added by `refine_device_states` (per device) and
`pool_device_counts` (per pool):

- blocked (`DeviceState.BLOCKED`): a device that consumes shared counters (a partition, or the whole
  device of a partitionable GPU) and is neither held nor tainted, while the counters its pool has
  left after the held devices' consumption cannot cover what it needs (upstream's counter check:
  every counter of the pool is compared). It is free in the counts (not held, not tainted) but
  cannot be allocated until a holder lets go.
- unhealthy (`DeviceState.UNHEALTHY`): a device whose own taints or a DeviceTaintRule carry
  effect NoExecute, whose device status in a claim (status.devices[].conditions) has condition
  `Ready` with status `False`, or that a running pod reports `Unhealthy` in its containers'
  allocatedResourcesStatus (KEP-4680, see `health`). Unhealthy wins over every other state in
  the grid; in the counts it is an extra column (an unhealthy device is still counted as
  allocated, tainted, ...).
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

import orjson
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast

from claims.choices import DeviceState
from claims.devices.health import reported_unhealthy_keys
from claims.models import AllocatedDevice
from dralib.allocator.quantity import exact_amount
from inventory.choices import TaintEffect
from inventory.models import CounterSet, Device, DeviceTaintRule

# States that make a device unavailable for a new exclusive allocation.
HELD_STATES = (DeviceState.ALLOCATED, DeviceState.SHARED)


# A run of 19 digits may be an integer past 64 bits, which orjson reads as a float, silently.
_LONG_NUMBER = re.compile(r"[0-9]{19}")


def json_text(text: str | None) -> Any:
    """A JSON column read as text (`Cast(field, TextField())`), decoded: orjson, several times
    faster than the json module Django's JSONField uses, when nothing in it could be an integer
    past 64 bits (orjson reads those as floats); the json module otherwise, exact. None stays
    None."""
    if text is None:
        return None
    if _LONG_NUMBER.search(text):
        return json.loads(text)
    return orjson.loads(text)


def _allocations() -> QuerySet[Any]:
    return AllocatedDevice.objects.filter(
        driver=OuterRef("driver"), pool=OuterRef("pool_name"), device=OuterRef("name")
    )


def rule_taints() -> QuerySet[DeviceTaintRule]:
    """DeviceTaintRules that taint the outer query's device (driver/pool_name/name OuterRefs).

    An empty selector field matches every device, as upstream's DeviceTaintSelector does.
    Taints with effect None are informational and do not keep new claims away.
    """
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
        rule_tainted=Exists(rule_taints()),
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


def _exact(text: str) -> Fraction | None:
    # A malformed amount constrains nothing; the sync reports the object.
    return exact_amount(text)


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


def _attribute_value(attributes: Mapping[str, Any], name: str, driver: str) -> str | None:
    """The string value of a fully qualified attribute; the driver's own domain may be omitted
    in the published name, as the DRA API allows."""
    domain, _, short = name.rpartition("/")
    value = attributes.get(name)
    if value is None and domain == driver:
        value = attributes.get(short)
    if isinstance(value, Mapping) and isinstance(value.get("string"), str):
        return str(value["string"])
    return None


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


def refine_device_states(devices: Sequence[Device]) -> None:
    """Add `blocked`, `unhealthy` and `effective_state` to devices from `annotate_device_state`:
    `state` unless unhealthy (wins over all) or blocked (instead of free). `state` itself stays
    the SQL column that filters and ordering use. A fixed number of queries for any list.

    The devices need `pool_id`, `consumes_counters` and `taints` loaded.
    """

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
    not_ready |= reported_unhealthy_keys()
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
            else DeviceState.BLOCKED
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


def blocked_device_ids(devices: QuerySet[Device] | None = None) -> set[int]:
    """Ids of current devices that `refine_device_states` would call blocked, in three queries.

    Which devices are held is read from the whole pool, whatever `devices` narrows to: a
    partition is blocked by its siblings' holders.
    """
    scope = Device.objects.filter(current=True)
    rules = _effective_rules()
    tainted = reduce(or_, (_rule_match(rule) for rule in rules), Q(tainted=True))
    available = _available_counters(_held_spellings(scope))
    if not available:
        return set()
    wanted = devices if devices is not None else scope
    # Blocked replaces free only: not tainted, and no allocation at all (admin access included).
    free = (
        wanted.filter(current=True, pool_id__in=list(available))
        .exclude(consumes_counters=[])
        .exclude(tainted)
        .exclude(Exists(_allocations()))
        .annotate(spelling=Cast("consumes_counters", TextField()))
    )
    return {
        pk
        for pk, pool_id, spelling in free.values_list("pk", "pool_id", "spelling")
        if _exceeds(available[pool_id], spelling)
    }


def unhealthy_device_ids(devices: QuerySet[Device] | None = None) -> set[int]:
    """Ids of devices that `refine_device_states` would call unhealthy, in six queries."""

    scope = devices if devices is not None else Device.objects.all()
    evicting = [_rule_match(rule) for rule in _effective_rules() if _no_execute([rule.taint])]
    ruled = reduce(or_, evicting) if evicting else Q(pk__isnull=True)
    flagged = Case(When(ruled, then=Value(True)), default=Value(False), output_field=BooleanField())
    rows = scope.filter(Q(tainted=True) | ruled).values_list("pk", "taints", flagged)
    found = {pk for pk, taints, rule in rows if rule or _no_execute(taints)}
    reports = AllocatedDevice.objects.exclude(conditions=[]).values_list("pk", "conditions")
    not_ready = [pk for pk, conditions in reports if _not_ready(conditions)]
    if not_ready:
        reported = AllocatedDevice.objects.filter(
            pk__in=not_ready,
            driver=OuterRef("driver"),
            pool=OuterRef("pool_name"),
            device=OuterRef("name"),
        )
        found.update(scope.filter(Exists(reported)).values_list("pk", flat=True))
    reported_keys = reported_unhealthy_keys()
    if reported_keys:
        names = {name for _, _, name in reported_keys}
        rows = scope.filter(name__in=names).values_list("pk", "driver", "pool_name", "name")
        found.update(pk for pk, *key in rows if tuple(key) in reported_keys)
    return found
