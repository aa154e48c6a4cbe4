"""ResourceSlices: their devices, counter sets and pools, written for a whole batch at once.

Devices are updated in place so their ids stay stable for the live UI and links. Pools are
recomputed once per batch from their slices, however many of their slices the batch carries:
only the highest generation counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.db.models import Count

from inventory.choices import Kind
from inventory.models import CounterSet, Device, Pool, ResourceSlice
from inventory.sync.core import (
    JSON,
    BatchResult,
    KindHandler,
    Pending,
    Written,
    chunks,
    delete_rows,
    insert_rows,
    new_row,
    register,
    update_rows,
)

POOL_FIELDS = [
    "generation",
    "resource_slice_count",
    "slices_seen",
    "complete",
    "node_name",
    "device_count",
]


def slice_columns(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    pool_spec = spec.get("pool") or {}
    return {
        "driver": str(spec.get("driver", "")),
        "pool_name": str(pool_spec.get("name", "")),
        "generation": int(pool_spec.get("generation") or 0),
        "node_name": spec.get("nodeName") or "",
        "all_nodes": bool(spec.get("allNodes")),
        "node_selector": spec.get("nodeSelector"),
        "per_device_node_selection": bool(spec.get("perDeviceNodeSelection")),
        "shared_counters": spec.get("sharedCounters") or [],
        "classic": "classic" in obj,
    }


def device_columns(device: Mapping[str, Any], spec: Mapping[str, Any]) -> JSON:
    """The Device columns of one entry of spec.devices (slice-wide fields fill the gaps)."""
    taints = device.get("taints") or []
    return {
        "node_name": device.get("nodeName") or spec.get("nodeName") or "",
        "all_nodes": bool(device.get("allNodes") or spec.get("allNodes")),
        "node_selector": device.get("nodeSelector") or spec.get("nodeSelector"),
        "attributes": device.get("attributes") or {},
        "capacity": device.get("capacity") or {},
        "allow_multiple_allocations": bool(device.get("allowMultipleAllocations")),
        "consumes_counters": device.get("consumesCounters") or [],
        "taints": taints,
        # Effect None is informational upstream: it keeps no pod away from the device.
        "tainted": any(t.get("effect") != "None" for t in taints if isinstance(t, Mapping)),
        "binds_to_node": bool(device.get("bindsToNode")),
        "binding_conditions": device.get("bindingConditions") or [],
        "binding_failure_conditions": device.get("bindingFailureConditions") or [],
        "spec": dict(device),
    }


DEVICE_FIELDS = [*device_columns({}, {}), "pool", "driver", "pool_name"]
# Device columns that do not follow from the device's own spec entry.
_DEVICE_CONTEXT = ("pool_id", "driver", "pool_name", "node_name", "all_nodes", "node_selector")


def slice_children(obj: JSON) -> tuple[dict[str, JSON], dict[str, Any]]:
    """Device columns by name and counters by counter set name, checked before any write."""
    spec = obj.get("spec") or {}
    devices = {str(d["name"]): device_columns(d, spec) for d in spec.get("devices") or []}
    counter_sets = {
        str(cs["name"]): cs.get("counters") or {} for cs in spec.get("sharedCounters") or []
    }
    return devices, counter_sets


def prepare_slices(changed: list[Pending], result: BatchResult) -> None:
    """Point every changed slice at its pool, creating the pools that do not exist yet."""
    keys = {(item.columns["driver"], item.columns["pool_name"]) for item in changed}
    pools: dict[tuple[str, str], int] = {}
    for part in chunks(sorted({name for _, name in keys})):
        for pk, driver, name in Pool.objects.filter(name__in=part).values_list(
            "pk", "driver", "name"
        ):
            if (driver, name) in keys:
                pools[(driver, name)] = pk
    missing = [
        new_row(Pool, driver=driver, name=name) for driver, name in sorted(keys - set(pools))
    ]
    insert_rows(Pool, missing, returning=("driver", "name"))
    pools.update({(pool.driver, pool.name): pool.pk for pool in missing})
    for item in changed:
        item.columns["pool_id"] = pools[(item.columns["driver"], item.columns["pool_name"])]


def slices_written(written: list[Written], result: BatchResult) -> None:
    updated = [entry.row.pk for entry in written if not entry.created]
    _sync_devices(written, updated, result)
    _sync_counter_sets(written, updated)
    for entry in written:
        result.dirty_pools.add(entry.item.columns["pool_id"])
        if not entry.created:
            result.dirty_pools.add(entry.item.stored["pool_id"])
        result.upserted += 1
        result.touch("slices", entry.row.pk)


def _sync_devices(written: list[Written], updated: list[int], result: BatchResult) -> None:
    stored: dict[int, dict[str, tuple[Any, ...]]] = defaultdict(dict)
    fields = ("pk", "slice_id", "name", "spec", *_DEVICE_CONTEXT)
    for part in chunks(updated):
        for values in Device.objects.filter(slice_id__in=part).values_list(*fields):
            stored[values[1]][values[2]] = values
    to_create: list[Device] = []
    to_update: list[Device] = []
    gone: list[int] = []
    for entry in written:
        row, item = entry.row, entry.item
        current = stored.pop(row.pk, {})
        context = {
            "pool_id": item.columns["pool_id"],
            "driver": item.columns["driver"],
            "pool_name": item.columns["pool_name"],
        }
        for name, columns in item.children[0].items():
            values = current.pop(name, None)
            device = new_row(Device, slice_id=row.pk, name=name, **context, **columns)
            if values is None:
                to_create.append(device)
                continue
            device.pk = values[0]
            wanted = (columns["spec"], *(getattr(device, f) for f in _DEVICE_CONTEXT))
            if wanted != values[3:]:
                to_update.append(device)
        gone.extend(values[0] for values in current.values())
    for part in chunks(gone):
        Device.objects.filter(pk__in=part).delete()
    insert_rows(Device, to_create, returning=("slice", "name"))
    update_rows(Device, to_update, DEVICE_FIELDS)
    result.touch("devices", *gone, *(d.pk for d in to_create if d.pk), *(d.pk for d in to_update))


def _sync_counter_sets(written: list[Written], updated: list[int]) -> None:
    stored: dict[int, dict[str, tuple[Any, ...]]] = defaultdict(dict)
    for part in chunks(updated):
        for values in CounterSet.objects.filter(slice_id__in=part).values_list(
            "pk", "slice_id", "name", "counters", "pool_id"
        ):
            stored[values[1]][values[2]] = values
    to_create: list[CounterSet] = []
    to_update: list[CounterSet] = []
    gone: list[int] = []
    for entry in written:
        row, pool_id = entry.row, entry.item.columns["pool_id"]
        current = stored.pop(row.pk, {})
        for name, counters in entry.item.children[1].items():
            values = current.pop(name, None)
            counter_set = new_row(
                CounterSet, slice_id=row.pk, pool_id=pool_id, name=name, counters=counters
            )
            if values is None:
                to_create.append(counter_set)
            elif (values[3], values[4]) != (counters, pool_id):
                counter_set.pk = values[0]
                to_update.append(counter_set)
        gone.extend(values[0] for values in current.values())
    for part in chunks(gone):
        CounterSet.objects.filter(pk__in=part).delete()
    insert_rows(CounterSet, to_create)
    update_rows(CounterSet, to_update, ["counters", "pool"])


def refresh_pools(pool_ids: set[int], result: BatchResult) -> None:
    """Recompute pools from their slices: only the highest generation counts."""
    pools = {
        pool.pk: pool
        for part in chunks(sorted(pool_ids))
        for pool in Pool.objects.filter(pk__in=part)
    }
    before = {pk: _pool_figures(pool) for pk, pool in pools.items()}
    slices: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for part in chunks(sorted(pools)):
        for values in ResourceSlice.objects.filter(pool_id__in=part).values_list(
            "pool_id",
            "pk",
            "generation",
            "obj__spec__pool__resourceSliceCount",
            "node_name",
            "current",
        ):
            slices[values[0]].append(values[1:])
    stale: list[int] = []
    fresh: list[int] = []
    empty: list[int] = []
    for pk, pool in pools.items():
        result.touch("pools", pk)
        rows = slices.get(pk)
        if not rows:
            empty.append(pk)
            continue
        generation = max(s[1] for s in rows)
        current = [s for s in rows if s[1] == generation]
        stale.extend(s[0] for s in rows if s[1] != generation and s[4])
        fresh.extend(s[0] for s in current if not s[4])
        nodes = {s[3] for s in current}
        pool.generation = generation
        pool.resource_slice_count = max(int(s[2] or 1) for s in current)
        pool.slices_seen = len(current)
        pool.complete = pool.slices_seen >= pool.resource_slice_count
        pool.node_name = next(iter(nodes)) if len(nodes) == 1 else ""
    for ids, flag in ((stale, False), (fresh, True)):
        for part in chunks(ids):
            ResourceSlice.objects.filter(pk__in=part).update(current=flag)
            Device.objects.filter(slice_id__in=part).update(current=flag)
    for part in chunks(empty):
        Pool.objects.filter(pk__in=part).delete()
    gone = set(empty)
    kept = [pool for pk, pool in pools.items() if pk not in gone]
    counts: dict[int, int] = {}
    for part in chunks([pool.pk for pool in kept]):
        counts.update(
            Device.objects.filter(pool_id__in=part, current=True)
            .order_by()
            .values_list("pool_id")
            .annotate(n=Count("pk"))
        )
    for pool in kept:
        pool.device_count = counts.get(pool.pk, 0)
    # Only pools whose figures moved: a slice changed in place (a device's attributes, its
    # labels) leaves its pool as it was, and rewriting it cost a statement per pool.
    update_rows(
        Pool, [pool for pool in kept if _pool_figures(pool) != before[pool.pk]], POOL_FIELDS
    )


def _pool_figures(pool: Pool) -> tuple[Any, ...]:
    return tuple(getattr(pool, name) for name in POOL_FIELDS)


def refresh_pool(pool: Pool, result: BatchResult) -> None:
    """Recompute one pool from its slices."""
    refresh_pools({pool.pk}, result)


def delete_resource_slices(rows: list[Any], result: BatchResult) -> None:
    pks = [row.pk for row in rows]
    for part in chunks(pks):
        devices = Device.objects.filter(slice_id__in=part).values_list("pk", flat=True)
        result.touch("devices", *devices)
    result.touch("slices", *pks)
    result.dirty_pools.update(row.pool_id for row in rows)
    delete_rows(rows)


def register_slices() -> None:
    register(
        KindHandler(
            Kind.RESOURCE_SLICE,
            ResourceSlice,
            slice_columns,
            delete_resource_slices,
            "slices",
            stored_fields=("pool_id",),
            children=slice_children,
            prepare=prepare_slices,
            written=slices_written,
        )
    )
