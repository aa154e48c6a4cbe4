"""Pool status in the shape of upstream's ResourcePoolStatusRequest (KEP-5677, resource.k8s.io
v1alpha3): per pool total, allocated, available and unavailable devices, a validation error for
pools whose newest generation is not fully published, and the partition and shareable summaries.

The numbers come from the same device states the pool pages show (`counts.pool_device_counts`):

- allocatedDevices: held by a non admin-access allocation (shared devices included);
- unavailableDevices: not allocated, but kept from a new allocation: tainted (NoSchedule or
  NoExecute, own taints or a DeviceTaintRule), blocked (its shared counters are exhausted) or
  unhealthy (Ready=False in a claim's device status, or a pod reporting it Unhealthy);
- availableDevices: totalDevices - allocatedDevices - unavailableDevices.

The partition summary groups a pool's counter-consuming devices by the string attribute the
slice names in `partitionTypeAttribute` (or the request's default) and counts, per type, how
many more devices of that type fit the counters left, allocating greedily in device name order.
The shareable summary adds up the consumable capacity of devices that allow multiple
allocations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from claims.devices.classes import class_membership, held_and_tainted
from claims.devices.counts import pool_device_counts, unavailable_unhealthy
from claims.devices.states import (
    _attribute_value,
    _consumption,
    _pool_counters,
    json_text,
)
from claims.devices.usage import _capacity_rows
from claims.models import AllocatedDevice
from dralib.allocator.quantity import parse_quantity
from inventory.models import Device, DeviceClass, Pool

API_VERSION = "resource.k8s.io/v1alpha3"
KIND = "ResourcePoolStatusRequest"
LIMIT_DEFAULT = 100
LIMIT_MAX = 1000


class PoolStatusError(ValueError):
    """A filter that names nothing answerable (an unknown DeviceClass, a bad limit)."""


@dataclass(frozen=True)
class PoolStatusFilter:
    """The request's spec: upstream's driver, poolName, limit and defaultPartitionTypeAttribute,
    plus the dashboard's node and DeviceClass filters. Upstream requires a driver; here it is
    optional and every driver is answered."""

    driver: str = ""
    pool_name: str = ""
    node: str = ""
    device_class: str = ""
    limit: int = LIMIT_DEFAULT
    default_partition_type_attribute: str = ""

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"driver": self.driver, "limit": self.limit}
        if self.pool_name:
            spec["poolName"] = self.pool_name
        if self.default_partition_type_attribute:
            spec["defaultPartitionTypeAttribute"] = self.default_partition_type_attribute
        return spec


def _pools(request: PoolStatusFilter) -> QuerySet[Pool]:
    pools = Pool.objects.all()
    if request.driver:
        pools = pools.filter(driver=request.driver)
    if request.pool_name:
        pools = pools.filter(name=request.pool_name)
    if request.node:
        pools = pools.filter(node_name=request.node)
    if request.device_class:
        if not DeviceClass.objects.filter(name=request.device_class).exists():
            raise PoolStatusError(f"DeviceClass {request.device_class!r} does not exist")
        members = class_membership().members.get(request.device_class, frozenset())
        pool_ids = Device.objects.filter(pk__in=list(members)).values("pool_id")
        pools = pools.filter(pk__in=pool_ids)
    return pools.order_by("driver", "name")


def _validation_error(pool: Pool) -> str | None:
    if pool.complete:
        return None
    return (
        f"incomplete: {pool.slices_seen} of {pool.resource_slice_count} ResourceSlices of "
        f"generation {pool.generation} are present"
    )[:256]


def _fits(left: dict[tuple[str, str], Fraction], need: Mapping[tuple[str, str], Fraction]) -> bool:
    # As upstream's counter check: a counter already overdrawn blocks every consumer of the pool.
    if any(value.numerator < 0 for value in left.values()):
        return False
    return all(key not in left or left[key] >= value for key, value in need.items())


def partition_summaries(
    pools: list[Pool], *, default_attribute: str = ""
) -> dict[int, list[dict[str, Any]]]:
    """Per pool id: one entry per (attribute, type) of its counter-consuming devices, with how
    many there are and how many more fit the counters their pool has left."""
    pool_ids = [pool.pk for pool in pools]
    if not pool_ids:
        return {}
    consumers = (
        Device.objects.filter(current=True, pool_id__in=pool_ids)
        .exclude(consumes_counters=[])
        .annotate(
            spelling=Cast("consumes_counters", TextField()),
            attributes_text=Cast("attributes", TextField()),
        )
        .order_by("name")
    )
    # Held and tainted devices (own taints or a DeviceTaintRule) from the holds kept for the
    # counts (claims.devices.classes), not an allocation subquery per device.
    membership = class_membership()
    holders, _, tainted = held_and_tainted(membership)
    keys = membership.keys
    rows = []
    for pool_id, driver, attributes, spelling, name, pool, own in consumers.values_list(
        "pool_id",
        "driver",
        "attributes_text",
        "spelling",
        "name",
        "pool_name",
        "slice__obj__spec__partitionTypeAttribute",
    ):
        pk = keys.get((driver, pool, name))
        rows.append((pool_id, driver, attributes, spelling, pk in holders, pk in tainted, own))
    if not rows:
        return {}
    left = _pool_counters({row[0] for row in rows})
    for pool_id, _, _, spelling, held, *_ in rows:
        if held:
            for key, value in _consumption(spelling).items():
                if key in left[pool_id]:  # upstream skips counters its pool does not declare
                    left[pool_id][key] -= value
    totals: dict[tuple[int, str, str], int] = defaultdict(int)
    candidates: dict[tuple[int, str, str], list[str]] = defaultdict(list)
    for pool_id, driver, attributes, spelling, held, taken_away, own in rows:
        attribute = own or default_attribute
        if not attribute:
            continue
        value = _attribute_value(json_text(attributes) or {}, str(attribute), driver)
        if value is None:
            continue
        key = (pool_id, str(attribute), value)
        totals[key] += 1
        # Admin-access use does not take a device: only exclusive holders and taints count.
        if not (held or taken_away):
            candidates[key].append(spelling)
    summaries: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for key in sorted(totals):
        pool_id, attribute, value = key
        remaining = dict(left[pool_id])
        allocatable = 0
        for spelling in candidates.get(key, []):
            need = _consumption(spelling)
            if _fits(remaining, need):
                allocatable += 1
                for counter, amount in need.items():
                    if counter in remaining:
                        remaining[counter] -= amount
        summaries[pool_id].append(
            {
                "attribute": attribute,
                "type": value,
                "total": totals[key],
                "allocatable": allocatable,
            }
        )
    return dict(summaries)


def shareable_summaries(pools: list[Pool]) -> dict[int, dict[str, Any]]:
    """Per pool id with shareable devices: how many have nothing consumed, how many some, and
    each capacity's total, consumed and available (never negative) across them."""
    devices = list(
        Device.objects.filter(
            current=True, pool_id__in=[pool.pk for pool in pools], allow_multiple_allocations=True
        ).only(
            "pk", "pool_id", "driver", "pool_name", "name", "capacity", "allow_multiple_allocations"
        )
    )
    if not devices:
        return {}
    usage, holders = _capacity_usages(devices)
    zero = parse_quantity("0")
    summaries: dict[int, dict[str, Any]] = {}
    sums: dict[int, dict[str, list[Any]]] = defaultdict(dict)
    for device in devices:
        summary = summaries.setdefault(
            device.pool_id, {"fullyAvailableDevices": 0, "partiallyAvailableDevices": 0}
        )
        rows = usage[device.pk]
        consumed = [parse_quantity(row["consumed"]) for row in rows]
        available = [parse_quantity(row["available"]) for row in rows]
        # A device without consumable capacity is used by any allocation at all.
        used = any(q.cmp(zero) > 0 for q in consumed) or (not rows and holders[device.pk] > 0)
        if not used:
            summary["fullyAvailableDevices"] += 1
        elif not rows or any(q.cmp(zero) > 0 for q in available):
            summary["partiallyAvailableDevices"] += 1
        for row in rows:
            entry = sums[device.pool_id].setdefault(row["capacity"], [zero, zero])
            entry[0] = entry[0].add(parse_quantity(row["value"]))
            entry[1] = entry[1].add(parse_quantity(row["consumed"]))
    for pool_id, capacities in sums.items():
        summaries[pool_id]["capacity"] = [
            {
                "name": name,
                "total": str(total),
                "consumed": str(consumed),
                "available": str(_non_negative(total.sub(consumed), zero)),
            }
            for name, (total, consumed) in sorted(capacities.items())
        ]
    return summaries


def _capacity_usages(
    devices: list[Device],
) -> tuple[dict[int, list[dict[str, Any]]], dict[int, int]]:
    """`usage.capacity_usages` for devices of many pools, and each device's number of holders:
    one query with IN lists, not an OR per pool (SQLite refuses an expression that deep)."""
    keys = {(device.driver, device.pool_name, device.name) for device in devices}
    shares: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    allocations = AllocatedDevice.objects.filter(
        admin_access=False,
        driver__in={key[0] for key in keys},
        pool__in={key[1] for key in keys},
        device__in={key[2] for key in keys},
    ).values_list("driver", "pool", "device", "consumed_capacity")
    for driver, pool, name, consumed in allocations:
        if (driver, pool, name) in keys:
            shares[(driver, pool, name)].append(consumed or {})
    rows: dict[int, list[dict[str, Any]]] = {}
    holders: dict[int, int] = {}
    for device in devices:
        held = shares.get((device.driver, device.pool_name, device.name), [])
        rows[device.pk] = _capacity_rows(device, held)
        holders[device.pk] = len(held)
    return rows, holders


def _non_negative(value: Any, zero: Any) -> Any:
    return zero if value.cmp(zero) < 0 else value


def pool_statuses(
    request: PoolStatusFilter, *, limit: int | None
) -> tuple[int, list[dict[str, Any]]]:
    """(poolCount, the first `limit` (None: all) PoolStatus entries sorted by driver then pool
    name)."""
    pools_qs = _pools(request)
    count = pools_qs.count()
    pools = list(pools_qs if limit is None else pools_qs[:limit])
    chosen = Pool.objects.filter(pk__in=[pool.pk for pool in pools])
    counts = pool_device_counts(chosen)
    extra = unavailable_unhealthy(chosen)
    partitions = partition_summaries(
        pools, default_attribute=request.default_partition_type_attribute
    )
    shareable = shareable_summaries(pools)
    entries = []
    for pool in pools:
        entry: dict[str, Any] = {
            "driver": pool.driver,
            "poolName": pool.name,
            "generation": pool.generation,
        }
        if pool.node_name:
            entry["nodeName"] = pool.node_name
        error = _validation_error(pool)
        if error:
            entry["validationError"] = error
        else:
            row = counts.get((pool.driver, pool.name)) or dict.fromkeys(("total",), 0)
            total = row.get("total", 0)
            allocated = row.get("allocated", 0)
            unavailable = (
                row.get("tainted", 0)
                + row.get("blocked", 0)
                + extra.get((pool.driver, pool.name), 0)
            )
            entry.update(
                resourceSliceCount=pool.resource_slice_count,
                totalDevices=total,
                allocatedDevices=allocated,
                availableDevices=total - allocated - unavailable,
                unavailableDevices=unavailable,
            )
            if pool.pk in partitions:
                entry["partitionSummary"] = partitions[pool.pk]
            if pool.pk in shareable:
                entry["shareableSummary"] = shareable[pool.pk]
        entries.append(entry)
    return count, entries


def pool_status_request(request: PoolStatusFilter) -> dict[str, Any]:
    """A completed ResourcePoolStatusRequest object answering `request` from the synced state."""
    if not 1 <= request.limit <= LIMIT_MAX:
        raise PoolStatusError(f"limit: must be between 1 and {LIMIT_MAX}, got {request.limit}")
    count, pools = pool_statuses(request, limit=request.limit)
    status: dict[str, Any] = {
        "poolCount": count,
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "Calculated",
                "message": f"{len(pools)} of {count} pools calculated from the synced state",
            }
        ],
    }
    if pools:
        status["pools"] = pools
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": request.spec(), "status": status}
