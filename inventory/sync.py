"""Apply Kubernetes objects to the database: the one write path for import, watch and demo.

Every kind has a handler that upserts one normalized object (idempotently: replaying an event
changes nothing) and deletes by uid. `apply_events` and `replace_all` run one transaction per
batch, record objects that fail to normalize instead of failing the batch, and publish the ids
that changed after the commit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.utils.dateparse import parse_datetime

from dashboard.logging import object_context
from inventory.choices import Kind
from inventory.models import (
    CounterSet,
    Device,
    DeviceClass,
    DeviceTaintRule,
    KubeObject,
    Node,
    Pool,
    ResourceClass,
    ResourceSlice,
    SkippedObject,
)

log = logging.getLogger(__name__)

JSON = dict[str, Any]


@dataclass
class Prefetch:
    """Rows of one kind loaded once for a bulk batch, so each object needs no lookup query."""

    rows: dict[str, KubeObject]
    names: set[tuple[str, str]]
    has_skips: bool


@dataclass
class BatchResult:
    """What a batch did: counts, skipped objects and changed ids per live-update topic."""

    upserted: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: list[str] = field(default_factory=list)
    changed: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    prefetch: Prefetch | None = field(default=None, repr=False)
    dirty_pools: set[int] = field(default_factory=set, repr=False)

    def touch(self, topic: str, *ids: object) -> None:
        self.changed[topic].update(str(i) for i in ids)

    def merge(self, other: BatchResult) -> None:
        self.upserted += other.upserted
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.skipped.extend(other.skipped)
        for topic, ids in other.changed.items():
            self.changed[topic].update(ids)


@dataclass(frozen=True)
class KindHandler:
    """How one kind is stored: its model, and functions to upsert and delete it."""

    kind: str
    model: type[KubeObject]
    upsert: Callable[[JSON, JSON, BatchResult], None]
    delete: Callable[[KubeObject, BatchResult], None]
    namespaced: bool = False
    # Objects the kind keeps out of the database (pods without claims) are dropped here.
    keep: Callable[[JSON], bool] = lambda obj: True


HANDLERS: dict[str, KindHandler] = {}

# Called after a batch's transaction commits (claims registers its diagnosis trigger here, so
# inventory does not import claims).
AFTER_COMMIT: list[Callable[[BatchResult], None]] = []


def register(handler: KindHandler) -> None:
    HANDLERS[handler.kind] = handler


def handler_for(kind: str) -> KindHandler:
    try:
        return HANDLERS[kind]
    except KeyError:
        raise ValueError(f"unsupported kind {kind!r}") from None


def meta_columns(raw: Mapping[str, Any], obj: Mapping[str, Any]) -> JSON:
    """The KubeObject columns of one object."""
    meta = obj.get("metadata") or {}
    created = meta.get("creationTimestamp")
    created_at: datetime | None = parse_datetime(created) if isinstance(created, str) else None
    return {
        "name": meta["name"],
        "api_version": str(raw.get("apiVersion", "")),
        "resource_version": str(meta.get("resourceVersion", "")),
        "created_at": created_at,
        "labels": meta.get("labels") or {},
        "raw": dict(raw),
        "obj": dict(obj),
    }


def object_uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    uid = meta.get("uid")
    if uid:
        return str(uid)
    # Objects from hand-written files may lack a uid: name them stably so re-import is idempotent.
    return f"nouid:{obj.get('kind', '')}:{meta.get('namespace', '')}/{meta.get('name', '')}"


class Upserted(NamedTuple):
    row: Any
    changed: bool
    created: bool


def find_row(model: type[KubeObject], uid: str, result: BatchResult | None) -> Any:
    if result is not None and result.prefetch is not None:
        return result.prefetch.rows.get(uid)
    return model.objects.filter(uid=uid).first()


def upsert_row(
    model: type[KubeObject],
    *,
    uid: str,
    columns: JSON,
    namespace: str | None = None,
    result: BatchResult | None = None,
) -> Upserted:
    """Create or update the row for `uid`. Unchanged rows are not written."""
    row = find_row(model, uid, result)
    created = row is None
    if row is None:
        prefetch = result.prefetch if result is not None else None
        if prefetch is None or (namespace or "", columns["name"]) in prefetch.names:
            # A recreated object has a new uid under the same name: the old row goes.
            lookup: JSON = {"name": columns["name"]}
            if namespace is not None:
                lookup["namespace"] = namespace
            model.objects.filter(**lookup).delete()
        row = model(uid=uid, **({"namespace": namespace} if namespace is not None else {}))
        if prefetch is not None:
            prefetch.rows[uid] = row
    elif row.raw == columns["raw"]:
        return Upserted(row, False, False)
    for key, value in columns.items():
        setattr(row, key, value)
    row.save()
    return Upserted(row, True, created)


def prefetch_rows(handler: KindHandler, uids: list[str]) -> Prefetch:
    from inventory.models import SkippedObject as Skipped

    rows: dict[str, KubeObject] = {}
    for start in range(0, len(uids), 500):
        for row in handler.model.objects.filter(uid__in=uids[start : start + 500]):
            rows[row.uid] = row
    fields = ["namespace", "name"] if handler.namespaced else ["name"]
    names = {
        (values[0], values[1]) if handler.namespaced else ("", values[0])
        for values in handler.model.objects.values_list(*fields)
    }
    return Prefetch(rows, names, Skipped.objects.filter(kind=handler.kind).exists())


def _is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def upsert_node(obj: JSON, raw: JSON, result: BatchResult) -> None:
    columns = meta_columns(raw, obj)
    columns["ready"] = _is_ready(obj)
    columns["unschedulable"] = bool((obj.get("spec") or {}).get("unschedulable"))
    row, changed, _ = upsert_row(Node, uid=object_uid(obj), columns=columns, result=result)
    count_change(result, changed, "nodes", row.name)


def delete_node(row: KubeObject, result: BatchResult) -> None:
    result.touch("nodes", row.name)
    row.delete()


def upsert_device_class(obj: JSON, raw: JSON, result: BatchResult) -> None:
    spec = obj.get("spec") or {}
    columns = meta_columns(raw, obj)
    columns["selectors"] = spec.get("selectors") or []
    columns["config"] = spec.get("config") or []
    columns["extended_resource_name"] = spec.get("extendedResourceName") or ""
    row, changed, _ = upsert_row(DeviceClass, uid=object_uid(obj), columns=columns, result=result)
    count_change(result, changed, "classes", row.pk)


def delete_row(topic: str) -> Callable[[KubeObject, BatchResult], None]:
    def delete(row: KubeObject, result: BatchResult) -> None:
        result.touch(topic, row.pk)
        row.delete()

    return delete


def upsert_resource_class(obj: JSON, raw: JSON, result: BatchResult) -> None:
    columns = meta_columns(raw, obj)
    columns["driver_name"] = str(
        obj.get("driverName") or (obj.get("classic") or {}).get("driverName") or ""
    )
    row, changed, _ = upsert_row(ResourceClass, uid=object_uid(obj), columns=columns, result=result)
    count_change(result, changed, "classes", row.pk)


def upsert_taint_rule(obj: JSON, raw: JSON, result: BatchResult) -> None:
    spec = obj.get("spec") or {}
    selector = spec.get("deviceSelector") or {}
    columns = meta_columns(raw, obj)
    columns["driver"] = selector.get("driver") or ""
    columns["pool_name"] = selector.get("pool") or ""
    columns["device_name"] = selector.get("device") or ""
    columns["taint"] = spec.get("taint") or {}
    row, changed, _ = upsert_row(
        DeviceTaintRule, uid=object_uid(obj), columns=columns, result=result
    )
    count_change(result, changed, "devices", "*")


def _device_columns(device: Mapping[str, Any], spec: Mapping[str, Any]) -> JSON:
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


def upsert_resource_slice(obj: JSON, raw: JSON, result: BatchResult) -> None:
    spec = obj.get("spec") or {}
    pool_spec = spec.get("pool") or {}
    driver = str(spec.get("driver", ""))
    pool_name = str(pool_spec.get("name", ""))
    uid = object_uid(obj)
    existing = find_row(ResourceSlice, uid, result)
    if existing is not None and existing.raw == raw:
        result.unchanged += 1
        return
    pool, _ = Pool.objects.get_or_create(driver=driver, name=pool_name)
    old_pool_id = existing.pool_id if existing is not None else None
    columns = meta_columns(raw, obj)
    columns.update(
        pool=pool,
        driver=driver,
        pool_name=pool_name,
        generation=int(pool_spec.get("generation") or 0),
        node_name=spec.get("nodeName") or "",
        all_nodes=bool(spec.get("allNodes")),
        node_selector=spec.get("nodeSelector"),
        per_device_node_selection=bool(spec.get("perDeviceNodeSelection")),
        shared_counters=spec.get("sharedCounters") or [],
        classic="classic" in obj,
    )
    row, _, created = upsert_row(ResourceSlice, uid=uid, columns=columns, result=result)
    _sync_devices(row, pool, spec, result, created=created)
    _sync_counter_sets(row, pool, spec, created=created)
    # Pools are recomputed once per batch, however many of their slices it carries.
    result.dirty_pools.add(pool.pk)
    if old_pool_id is not None:
        result.dirty_pools.add(old_pool_id)
    result.upserted += 1
    result.touch("slices", row.pk)


def _sync_devices(
    row: ResourceSlice, pool: Pool, spec: Mapping[str, Any], result: BatchResult, *, created: bool
) -> None:
    # Update devices in place so their ids stay stable for the live UI and links.
    existing = {} if created else {device.name: device for device in row.devices.all()}
    wanted: dict[str, JSON] = {}
    for device in spec.get("devices") or []:
        wanted[str(device["name"])] = _device_columns(device, spec)
    to_create: list[Device] = []
    to_update: list[Device] = []
    for name, columns in wanted.items():
        current = existing.pop(name, None)
        if current is None:
            to_create.append(
                Device(
                    slice=row,
                    pool=pool,
                    driver=row.driver,
                    pool_name=row.pool_name,
                    name=name,
                    **columns,
                )
            )
            continue
        if (
            current.spec == columns["spec"]
            and current.pool_id == pool.pk
            and current.node_name == columns["node_name"]
        ):
            continue
        for key, value in columns.items():
            setattr(current, key, value)
        current.pool = pool
        current.driver = row.driver
        current.pool_name = row.pool_name
        to_update.append(current)
    if existing:
        result.touch("devices", *(d.pk for d in existing.values()))
        Device.objects.filter(pk__in=[d.pk for d in existing.values()]).delete()
    if to_create:
        Device.objects.bulk_create(to_create, batch_size=500)
        result.touch("devices", *(d.pk for d in to_create if d.pk))
    if to_update:
        Device.objects.bulk_update(
            to_update,
            [*_DEVICE_UPDATE_FIELDS, "pool", "driver", "pool_name"],
            batch_size=500,
        )
        result.touch("devices", *(d.pk for d in to_update))


_DEVICE_UPDATE_FIELDS = list(_device_columns({}, {}).keys())


def _sync_counter_sets(
    row: ResourceSlice, pool: Pool, spec: Mapping[str, Any], *, created: bool
) -> None:
    wanted = {str(cs["name"]): cs.get("counters") or {} for cs in spec.get("sharedCounters") or []}
    existing = {} if created else {cs.name: cs for cs in row.counter_sets.all()}
    for name, counters in wanted.items():
        current = existing.pop(name, None)
        if current is None:
            CounterSet.objects.create(slice=row, pool=pool, name=name, counters=counters)
        elif current.counters != counters or current.pool_id != pool.pk:
            current.counters = counters
            current.pool = pool
            current.save(update_fields=["counters", "pool"])
    if existing:
        CounterSet.objects.filter(pk__in=[cs.pk for cs in existing.values()]).delete()


def refresh_pool(pool: Pool, result: BatchResult) -> None:
    """Recompute a pool from its slices: only the highest generation counts."""
    slices = list(
        ResourceSlice.objects.filter(pool=pool).values_list(
            "pk", "generation", "obj", "node_name", "current"
        )
    )
    if not slices:
        result.touch("pools", pool.pk)
        pool.delete()
        return
    generation = max(s[1] for s in slices)
    current = [s for s in slices if s[1] == generation]
    counts = [
        int(((s[2].get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 1)
        for s in current
    ]
    nodes = {s[3] for s in current}
    stale_ids = [s[0] for s in slices if s[1] != generation and s[4]]
    fresh_ids = [s[0] for s in current if not s[4]]
    if stale_ids:
        ResourceSlice.objects.filter(pk__in=stale_ids).update(current=False)
        Device.objects.filter(slice_id__in=stale_ids).update(current=False)
    if fresh_ids:
        ResourceSlice.objects.filter(pk__in=fresh_ids).update(current=True)
        Device.objects.filter(slice_id__in=fresh_ids).update(current=True)
    pool.generation = generation
    pool.resource_slice_count = max(counts)
    pool.slices_seen = len(current)
    pool.complete = len(current) >= pool.resource_slice_count
    pool.node_name = next(iter(nodes)) if len(nodes) == 1 else ""
    pool.device_count = Device.objects.filter(pool=pool, current=True).count()
    pool.save()
    result.touch("pools", pool.pk)


def delete_resource_slice(row: KubeObject, result: BatchResult) -> None:
    assert isinstance(row, ResourceSlice)
    result.touch("devices", *row.devices.values_list("pk", flat=True))
    result.touch("slices", row.pk)
    result.dirty_pools.add(row.pool_id)
    row.delete()


def count_change(result: BatchResult, changed: bool, topic: str, pk: object) -> None:
    if changed:
        result.upserted += 1
        result.touch(topic, pk)
    else:
        result.unchanged += 1


register(KindHandler(Kind.NODE, Node, upsert_node, delete_node))
register(KindHandler(Kind.DEVICE_CLASS, DeviceClass, upsert_device_class, delete_row("classes")))
register(
    KindHandler(Kind.RESOURCE_CLASS, ResourceClass, upsert_resource_class, delete_row("classes"))
)
register(
    KindHandler(Kind.DEVICE_TAINT_RULE, DeviceTaintRule, upsert_taint_rule, delete_row("devices"))
)
register(
    KindHandler(Kind.RESOURCE_SLICE, ResourceSlice, upsert_resource_slice, delete_resource_slice)
)


def _normalize(raw: Mapping[str, Any]) -> JSON:
    from inventory.kube.normalize import normalize

    return normalize(raw)


def _record_skip(kind: str, raw: Mapping[str, Any], exc: Exception, result: BatchResult) -> None:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "<unnamed>")
    SkippedObject.objects.update_or_create(
        kind=kind,
        namespace=namespace,
        name=name,
        defaults={
            "api_version": str(raw.get("apiVersion", "")) if isinstance(raw, Mapping) else "",
            "field": str(getattr(exc, "field", "") or ""),
            "error": str(exc),
        },
    )
    result.skipped.append(str(exc))
    log.warning("skipped %s %s/%s: %s", kind, namespace, name, exc)


def _apply_one(
    kind: str, event_type: str, raw: JSON, result: BatchResult, obj: JSON | None = None
) -> None:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    # Every log line about this object names it (kind, namespace, name).
    with object_context(kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")):
        _apply_object(kind, event_type, raw, result, obj)


def _apply_object(
    kind: str, event_type: str, raw: JSON, result: BatchResult, obj: JSON | None
) -> None:
    handler = handler_for(kind)
    if event_type == "DELETED":
        uid = object_uid(raw)
        row = handler.model.objects.filter(uid=uid).first()
        if row is None:
            meta = raw.get("metadata") or {}
            lookup = {"name": meta.get("name")}
            if handler.namespaced:
                lookup["namespace"] = meta.get("namespace", "")
            row = handler.model.objects.filter(**lookup).first()
        if row is not None:
            handler.delete(row, result)
            result.deleted += 1
        return
    if obj is None:
        try:
            obj = _normalize(raw)
        except ValueError as exc:
            _record_skip(kind, raw, exc, result)
            return
    if not handler.keep(obj):
        row = handler.model.objects.filter(uid=object_uid(obj)).first()
        if row is not None:
            handler.delete(row, result)
            result.deleted += 1
        return
    # A savepoint per object: one object's database error must not lose the rest of the batch.
    try:
        with transaction.atomic():
            handler.upsert(obj, raw, result)
    except (ValueError, KeyError, TypeError) as exc:
        _record_skip(kind, raw, exc, result)
        return
    if result.prefetch is None or result.prefetch.has_skips:
        meta = obj.get("metadata") or {}
        SkippedObject.objects.filter(
            kind=kind, namespace=meta.get("namespace") or "", name=meta.get("name") or ""
        ).delete()


def apply_events(
    kind: str, events: Iterable[tuple[str, JSON]], *, publish: bool = True
) -> BatchResult:
    """Apply watch events (ADDED/MODIFIED/DELETED, raw objects) of one kind in one transaction."""
    result = BatchResult()
    with transaction.atomic():
        for event_type, raw in events:
            _apply_one(kind, event_type, raw, result)
        _finish(result, publish=publish)
    return result


def upsert_events(
    kind: str, pairs: Iterable[tuple[JSON, JSON | None]], *, publish: bool = True
) -> BatchResult:
    """Upsert (raw, normalized-or-None) objects of one kind in one transaction."""
    result = BatchResult()
    pairs = list(pairs)
    with transaction.atomic():
        result.prefetch = prefetch_rows(handler_for(kind), [object_uid(raw) for raw, _ in pairs])
        for raw, obj in pairs:
            _apply_one(kind, "ADDED", raw, result, obj)
        result.prefetch = None
        _finish(result, publish=publish)
    return result


def replace_all(
    kind: str,
    pairs: Iterable[tuple[JSON, JSON | None]],
    *,
    publish: bool = True,
    scope_namespace: str | None = None,
) -> BatchResult:
    """Make the stored objects of `kind` equal to `pairs` (raw, normalized-or-None).

    Upserts each object and deletes the rest: what a relist after 410 Gone and a full
    snapshot import do. An object that fails to normalize is recorded and its stored row kept.
    """
    handler = handler_for(kind)
    result = BatchResult()
    pairs = list(pairs)
    with transaction.atomic():
        seen = {object_uid(raw) for raw, _ in pairs}
        result.prefetch = prefetch_rows(handler, list(seen))
        for raw, obj in pairs:
            _apply_one(kind, "ADDED", raw, result, obj)
        result.prefetch = None
        stored = handler.model.objects.all()
        if scope_namespace is not None:
            stored = stored.filter(namespace=scope_namespace)
        # Compare in Python: a NOT IN over thousands of uids exceeds SQLite's parameter limit.
        stale_pks = [pk for pk, uid in stored.values_list("pk", "uid") if uid not in seen]
        for start in range(0, len(stale_pks), 500):
            for row in handler.model.objects.filter(pk__in=stale_pks[start : start + 500]):
                handler.delete(row, result)
                result.deleted += 1
        _finish(result, publish=publish)
    return result


def _finish(result: BatchResult, *, publish: bool) -> None:
    for pool in Pool.objects.filter(pk__in=sorted(result.dirty_pools)):
        refresh_pool(pool, result)
    result.dirty_pools.clear()
    if publish:
        _publish(result)
    if result.changed:
        for hook in AFTER_COMMIT:
            transaction.on_commit(lambda hook=hook: hook(result))


def _publish(result: BatchResult) -> None:
    from dashboard.live import publish_changes

    publish_changes({topic: sorted(ids) for topic, ids in result.changed.items() if ids})
