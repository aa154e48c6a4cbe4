"""Utilisation of the inventory, computed in the database.

Device states, pool and class counts are SQL annotations and aggregates (no Python loops over
device rows), so list pages and the API stay one query whatever the cluster size. Only quantity
arithmetic (counters and consumable capacity), which SQL cannot do exactly, is done in Python, and
only for one pool or one device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
    Value,
    When,
)
from django.db.models.functions import Coalesce

from inventory.choices import DeviceState, TaintEffect
from inventory.models import Device, DeviceClass, DeviceTaintRule, Pool

# States that make a device unavailable for a new exclusive allocation.
HELD_STATES = (DeviceState.ALLOCATED, DeviceState.SHARED)

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


def driver_utilisation(drivers: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Current device counts per driver and state, in one grouped query."""
    devices = Device.objects.filter(current=True)
    if drivers is not None:
        devices = devices.filter(driver__in=list(drivers))
    rows = (
        annotate_device_state(devices)
        .order_by()
        .values("driver")
        .annotate(
            total=Count("pk"),
            allocated=Count("pk", filter=Q(state__in=HELD_STATES)),
            shared=Count("pk", filter=Q(state=DeviceState.SHARED)),
            admin=Count("pk", filter=Q(state=DeviceState.ADMIN)),
            tainted=Count("pk", filter=Q(state=DeviceState.TAINTED)),
        )
    )
    result: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = {
            key: int(row[key]) for key in ("total", "allocated", "shared", "admin", "tainted")
        }
        counts["free"] = counts["total"] - counts["allocated"] - counts["tainted"]
        result[str(row["driver"])] = counts
    return result


def class_utilisation() -> dict[str, Any]:
    """Per DeviceClass: the driver it selects (approximated, see `method`) and device counts."""
    classes = list(DeviceClass.objects.only("pk", "name", "selectors").order_by("name"))
    drivers = {device_class.pk: class_driver(device_class) for device_class in classes}
    counts = driver_utilisation({d for d in drivers.values() if d})
    empty = dict.fromkeys(("total", "allocated", "shared", "admin", "tainted", "free"), 0)
    entries = []
    for device_class in classes:
        driver = drivers[device_class.pk]
        entries.append(
            {
                "name": device_class.name,
                "driver": driver,
                "approximate": driver is not None,
                "devices": (counts.get(driver, empty) if driver else None),
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
    from claims.models import AllocatedDevice

    shares = AllocatedDevice.objects.filter(
        driver=device.driver, pool=device.pool_name, device=device.name, admin_access=False
    ).values_list("consumed_capacity", flat=True)
    consumed: dict[str, Any] = {}
    for entry in shares:
        for name, amount in (entry or {}).items():
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
