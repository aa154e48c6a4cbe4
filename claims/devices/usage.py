"""Shared counters and consumable capacity: what a pool or device has, what its holders take.

Quantity arithmetic is exact (Kubernetes quantities), so it is done in Python, not SQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import (
    Q,
)

from claims.models import AllocatedDevice
from dralib.allocator.quantity import parse_quantity
from inventory.models import Device, Pool


def _held_keys(driver: str, pool_name: str) -> set[str]:
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
                value = parse_quantity(str((amount or {}).get("value", "0")))
                consumed[key] = consumed[key].add(value) if key in consumed else value
    zero = parse_quantity("0")
    usage: list[dict[str, Any]] = []
    for counter_set in counter_sets:
        for counter, amount in sorted((counter_set.counters or {}).items()):
            capacity = parse_quantity(str((amount or {}).get("value", "0")))
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
            value = parse_quantity(str(amount))
            consumed[name] = consumed[name].add(value) if name in consumed else value
    zero = parse_quantity("0")
    # Without allowMultipleAllocations an allocation takes the whole device, capacity and all.
    exclusive = bool(shares) and not device.allow_multiple_allocations
    usage: list[dict[str, Any]] = []
    capacity: Mapping[str, Any] = device.capacity or {}
    for name, spec in sorted(capacity.items()):
        total = parse_quantity(str((spec or {}).get("value", "0")))
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
