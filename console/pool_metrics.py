"""The per-pool series of `/metrics`, exported only with DASHBOARD_METRICS_PER_POOL=1: devices by
state, upstream's PoolStatus numbers, shared counters and consumable capacity, per driver and
pool. They grow with the cluster (8.9 MB a scrape at 5,000 nodes), so `console.metrics` leaves
them out unless asked; the numbers are the pool pages' and the pool-status API's.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from fractions import Fraction
from typing import Any

from django.db.models import Exists, OuterRef
from prometheus_client.metrics_core import Metric

from claims.devices.counts import pool_device_counts
from claims.devices.poolstatus import PoolStatusFilter, pool_statuses
from claims.models import AllocatedDevice
from console.gauges import gauge
from dralib.allocator.quantity import exact_amount
from inventory.models import CounterSet, Device

# The scrape's logger: bad quantities are reported as the scrape's own warnings.
log = logging.getLogger("console.metrics")


class _Quantities:
    """Parses quantities exactly; malformed ones are left out and reported once per scrape."""

    def __init__(self) -> None:
        self.bad: list[str] = []

    def parse(self, text: Any, *, where: str) -> Fraction | None:
        value = exact_amount(str(text))
        if value is None:
            self.bad.append(f"{where}: {text!r}")
        return value

    def report(self, metric: str) -> None:
        if self.bad:
            examples = "; ".join(self.bad[:3])
            log.warning(
                "metrics %s: %d bad quantities left out (%s)", metric, len(self.bad), examples
            )


def device_metrics() -> list[Metric]:
    """Devices per pool and driver by state."""

    # The same counts the overview and the pool pages show: one definition of "allocated".
    rows = sorted(pool_device_counts(refine=False).items())
    labels = ("driver", "pool")
    total = gauge("devices", "Devices of the current pool generation.", labels)
    allocated = gauge(
        "devices_allocated", "Devices held by a (non admin-access) allocation.", labels
    )
    free = gauge("devices_free", "Devices neither allocated nor tainted.", labels)
    tainted = gauge(
        "devices_tainted", "Devices not allocated but tainted (NoSchedule/NoExecute).", labels
    )
    for (driver, pool_name), row in rows:
        key = [driver, pool_name]
        total.add_metric(key, row["total"])
        allocated.add_metric(key, row["allocated"])
        tainted.add_metric(key, row["tainted"])
        free.add_metric(key, row["free"])
    return [total, allocated, free, tainted]


def pool_status_metrics() -> list[Metric]:
    """The numbers of GET /api/inventory/pool-status/ (upstream's PoolStatus) for every pool."""
    _, statuses = pool_statuses(PoolStatusFilter(), limit=None)
    devices = gauge(
        "pool_status_devices",
        "PoolStatus device counts: state is total, allocated, available or unavailable "
        "(not allocated but tainted, blocked or unhealthy). Unset for pools with a "
        "validation error.",
        ("driver", "pool", "state"),
    )
    invalid = gauge(
        "pool_status_validation_error",
        "1 when the pool has a PoolStatus validationError (its newest generation is incomplete).",
        ("driver", "pool"),
    )
    partitions = gauge(
        "pool_status_partition_devices",
        "PoolStatus partitionSummary: devices per partition type (state total) and how many "
        "more fit the shared counters left (state allocatable).",
        ("driver", "pool", "attribute", "type", "state"),
    )
    fields = (
        ("total", "totalDevices"),
        ("allocated", "allocatedDevices"),
        ("available", "availableDevices"),
        ("unavailable", "unavailableDevices"),
    )
    for entry in statuses:
        key = [entry["driver"], entry["poolName"]]
        invalid.add_metric(key, 1 if "validationError" in entry else 0)
        for state, field in fields:
            if field in entry:
                devices.add_metric([*key, state], entry[field])
        for summary in entry.get("partitionSummary", []):
            labels = [*key, summary["attribute"], summary["type"]]
            partitions.add_metric([*labels, "total"], summary["total"])
            partitions.add_metric([*labels, "allocatable"], summary["allocatable"])
    return [devices, invalid, partitions]


def counter_metrics() -> list[Metric]:
    """sharedCounters of current slices per pool and counter: capacity, and what allocated
    devices consume of it (summed over the pool's counter sets, to keep one series per counter).
    """

    quantities = _Quantities()
    labels = ("driver", "pool", "counter")
    capacity: dict[tuple[str, ...], Fraction] = defaultdict(Fraction)
    consumed: dict[tuple[str, ...], Fraction] = defaultdict(Fraction)
    sets = CounterSet.objects.filter(slice__current=True).values_list(
        "pool__driver", "pool__name", "name", "counters"
    )
    for driver, pool, set_name, counters in sets:
        for counter, amount in (counters or {}).items():
            value = quantities.parse(
                (amount or {}).get("value", "0"), where=f"{driver}/{pool}/{set_name}"
            )
            if value is not None:
                capacity[(driver, pool, str(counter))] += value
    held = AllocatedDevice.objects.filter(
        driver=OuterRef("driver"),
        pool=OuterRef("pool_name"),
        device=OuterRef("name"),
        admin_access=False,
    )
    consumers = (
        Device.objects.filter(Exists(held), current=True)
        .exclude(consumes_counters=[])
        .values_list("driver", "pool_name", "name", "consumes_counters")
    )
    for driver, pool, name, consumes in consumers:
        for entry in consumes or []:
            for counter, amount in (entry.get("counters") or {}).items():
                value = quantities.parse(
                    (amount or {}).get("value", "0"), where=f"{driver}/{pool}/{name}"
                )
                if value is not None:
                    consumed[(driver, pool, str(counter))] += value
    capacity_family = gauge(
        "counter_capacity", "sharedCounters capacity, summed over a pool's counter sets.", labels
    )
    consumed_family = gauge(
        "counter_consumed",
        "Counter amount consumed by allocated devices (consumesCounters), per pool.",
        labels,
    )
    for key in sorted(capacity):
        capacity_family.add_metric(list(key), float(capacity[key]))
        consumed_family.add_metric(list(key), float(consumed.get(key, Fraction(0))))
    quantities.report("counters")
    return [capacity_family, consumed_family]


def capacity_metrics() -> list[Metric]:
    """Consumable capacity of devices that allow multiple allocations, summed per pool and name.

    Consumed is the sum of `consumedCapacity` over the (non admin-access) allocations of those
    devices; exclusively allocated devices are counted by `devices_allocated` instead.
    """

    quantities = _Quantities()
    labels = ("driver", "pool", "capacity")
    capacity: dict[tuple[str, ...], Fraction] = defaultdict(Fraction)
    consumed: dict[tuple[str, ...], Fraction] = defaultdict(Fraction)
    shared: set[tuple[str, str, str]] = set()
    devices = Device.objects.filter(current=True, allow_multiple_allocations=True).values_list(
        "driver", "pool_name", "name", "capacity"
    )
    for driver, pool, name, device_capacity in devices:
        shared.add((driver, pool, name))
        for capacity_name, spec in (device_capacity or {}).items():
            value = quantities.parse(
                (spec or {}).get("value", "0"), where=f"{driver}/{pool}/{name}"
            )
            if value is not None:
                capacity[(driver, pool, str(capacity_name))] += value
    allocations = (
        AllocatedDevice.objects.filter(admin_access=False)
        .exclude(consumed_capacity={})
        .values_list("driver", "pool", "device", "consumed_capacity")
    )
    for driver, pool, device, amounts in allocations:
        if (driver, pool, device) not in shared:
            continue
        for capacity_name, amount in (amounts or {}).items():
            value = quantities.parse(amount, where=f"{driver}/{pool}/{device}")
            if value is not None:
                consumed[(driver, pool, str(capacity_name))] += value
    capacity_family = gauge(
        "capacity", "Consumable capacity of devices allowing multiple allocations.", labels
    )
    consumed_family = gauge(
        "capacity_consumed", "consumedCapacity of allocations on those devices.", labels
    )
    for key in sorted(capacity):
        capacity_family.add_metric(list(key), float(capacity[key]))
        consumed_family.add_metric(list(key), float(consumed.get(key, Fraction(0))))
    quantities.report("capacity")
    return [capacity_family, consumed_family]


def per_pool_families() -> list[Metric]:
    """Every per-pool series (DASHBOARD_METRICS_PER_POOL): devices, pool status, counters and
    consumable capacity."""
    return [*device_metrics(), *pool_status_metrics(), *counter_metrics(), *capacity_metrics()]
