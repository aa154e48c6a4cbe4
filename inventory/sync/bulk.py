"""Write the objects of one batch with a handful of queries instead of several per object.

Objects are normalized and turned into columns first, so an object that cannot be stored is
recorded and dropped before anything is written. The rest are written segment by segment: a
segment holds objects with distinct uids and names (a batch repeating an object starts a new
one, keeping event order; a delete and recreate under one name stays in one), loads its stored
rows in one query, leaves unchanged rows alone and bulk-creates or bulk-updates the others.
Should a bulk write still fail (a value the database rejects), the segment is rolled back to
its savepoint and written again object by object, each in its own savepoint, so one bad object
never loses the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from dashboard.logging import object_context
from dralib.kube.normalize import normalize
from inventory.models import SkippedObject
from inventory.sync.core import (
    JSON,
    BatchResult,
    KindHandler,
    Pending,
    Written,
    chunks,
    forget_json_text,
    insert_rows,
    log,
    meta_columns,
    new_row,
    object_uid,
    record_skip,
    update_rows,
    without_json,
)

# What one object can make a write fail with; anything else (a lost connection, a locked
# database) fails the whole batch, which the caller retries.
WRITE_ERRORS = (ValueError, KeyError, TypeError, OverflowError, IntegrityError, DataError)

# Objects in one segment. A segment keeps its objects (raw, normalized, columns) until it is
# written: the cap bounds what a relist of thousands of objects holds at once, while still
# writing in bulk. Not tied to the list page size or to the query limits of `core`.
SEGMENT_SIZE = 500


@dataclass
class Removal:
    """An object to remove: a DELETED event, or an object the kind does not keep."""

    uid: str
    namespace: str
    name: str
    raw: Any
    # DELETED events fall back to the name when the uid is unknown (a missed recreate).
    by_name: bool


@dataclass
class Segment:
    """Objects with distinct uids, written together: removals first, then the rest.

    A name may repeat only as a removal followed by a new object (a delete and recreate, as a
    replaced node or a pod of a StatefulSet): removals run first, so the order holds. Any
    other repeat starts a new segment, keeping event order."""

    items: list[Pending] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    uids: set[str] = field(default_factory=set)
    item_names: set[tuple[str, str]] = field(default_factory=set)
    # uid -> index in `items`: a later state of a queued object replaces it (a row is written
    # whole, so only the last state of a batch matters; status updates come in bursts).
    queued: dict[str, int] = field(default_factory=dict)
    # Objects it may hold beyond SEGMENT_SIZE (a watch batch, held whole anyway).
    limit: int = 0

    def replace(self, item: Pending) -> bool:
        """Put `item` in the place of a queued state of the same object; False if none."""
        index = self.queued.get(item.uid)
        if index is None:
            return False
        queued = self.items[index]
        if (queued.namespace, queued.name) != (item.namespace, item.name):
            return False
        self.items[index] = item
        return True

    def drop(self, uid: str, namespace: str, name: str) -> bool:
        """Forget the queued state of an object about to be removed; False if none."""
        index = self.queued.get(uid)
        if index is None or (self.items[index].namespace, self.items[index].name) != (
            namespace,
            name,
        ):
            return False
        del self.items[index]
        self.queued = {item.uid: position for position, item in enumerate(self.items)}
        return True

    def fits(self, uid: str, namespace: str, name: str) -> bool:
        return (
            uid not in self.uids
            and (namespace, name) not in self.item_names
            and len(self.items) + len(self.removals) < max(self.limit, SEGMENT_SIZE)
        )

    def claim(self, uid: str, namespace: str, name: str, *, item: bool) -> None:
        self.uids.add(uid)
        if item:
            self.item_names.add((namespace, name))

    def singles(self) -> list[tuple[Segment, Any]]:
        """One segment per object, with the raw object to name when it fails."""
        parts: list[tuple[Segment, Any]] = [(Segment(removals=[r]), r.raw) for r in self.removals]
        parts.extend((Segment(items=[item]), item.raw) for item in self.items)
        return parts


def _metadata(raw: Any) -> Mapping[str, Any]:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _normalize(raw: Mapping[str, Any]) -> JSON:
    return normalize(raw)


class BatchWriter:
    """Collects the objects of one batch of one kind and writes them in bulk.

    `new_only` says no object is stored yet (a relist into an empty table: the initial sync),
    so segments are inserted without reading stored rows first. Should that be wrong (another
    writer stored one meanwhile), the insert fails on the uid and the segment is written again
    object by object, reading what is stored. `segment_size` lets a segment hold more than
    SEGMENT_SIZE objects (a watch batch, held whole by its caller anyway).
    """

    def __init__(
        self,
        handler: KindHandler,
        result: BatchResult,
        *,
        new_only: bool = False,
        segment_size: int = 0,
    ) -> None:
        self.handler = handler
        self.result = result
        self.new_only = new_only
        self.segment_size = segment_size
        self.segment = Segment(limit=segment_size)
        self._skipped: set[tuple[str, str]] | None = None

    def upsert(self, raw: JSON, obj: JSON | None = None) -> None:
        """Queue one object to create or update (normalized here when `obj` is None)."""
        meta = _metadata(raw)
        # Every log line about this object names it (kind, namespace, name).
        with object_context(
            kind=self.handler.kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        ):
            try:
                if obj is None:
                    obj = _normalize(raw)
                if not self.handler.keep(obj):
                    self._queue_removal(raw, obj, by_name=False)
                    return
                item = self._pending(raw, obj)
            except (ValueError, KeyError, TypeError) as exc:
                self.skip(raw, exc)
                return
        if self.segment.replace(item):
            self.result.superseded += 1
            return
        if not self.segment.fits(item.uid, item.namespace, item.name):
            self.flush()
        self.segment.claim(item.uid, item.namespace, item.name, item=True)
        self.segment.queued[item.uid] = len(self.segment.items)
        self.segment.items.append(item)

    def remove(self, raw: JSON) -> None:
        """Queue a DELETED event's object for removal."""
        self._queue_removal(raw, raw, by_name=True)

    def _queue_removal(self, raw: JSON, obj: Mapping[str, Any], *, by_name: bool) -> None:
        meta = _metadata(obj)
        namespace = str(meta.get("namespace", "")) if self.handler.namespaced else ""
        removal = Removal(object_uid(obj), namespace, str(meta.get("name")), raw, by_name)
        if self.segment.drop(removal.uid, removal.namespace, removal.name):
            # Its queued state is never written; the row it may have already is still removed.
            self.result.superseded += 1
            self.segment.removals.append(removal)
            return
        if not self.segment.fits(removal.uid, removal.namespace, removal.name):
            self.flush()
        self.segment.claim(removal.uid, removal.namespace, removal.name, item=False)
        self.segment.removals.append(removal)

    def _pending(self, raw: JSON, obj: JSON) -> Pending:
        if self.handler.redact is not None:
            # One value when normalizing changed nothing (an import hands both as one): the
            # second redaction of every pod was a tenth of writing them.
            redacted = self.handler.redact(raw)
            raw, obj = redacted, redacted if obj is raw else self.handler.redact(obj)
        columns = meta_columns(raw, obj)
        columns.update(self.handler.columns(obj))
        namespace = ""
        if self.handler.namespaced:
            namespace = str((obj.get("metadata") or {}).get("namespace", ""))
            columns["namespace"] = namespace
        name = columns["name"]
        if not isinstance(name, str) or not name:
            raise ValueError("metadata.name: required")
        return Pending(object_uid(obj), namespace, name, raw, obj, columns)

    def skip(self, raw: Any, exc: BaseException) -> None:
        record_skip(self.handler.kind, raw, exc, self.result)
        meta = _metadata(raw)
        self._skipped_names().add(
            (str(meta.get("namespace") or ""), str(meta.get("name") or "<unnamed>"))
        )

    def flush(self) -> None:
        """Write the queued segment: in bulk, or object by object if the bulk write fails."""
        segment, self.segment = self.segment, Segment(limit=self.segment_size)
        if not segment.items and not segment.removals:
            return
        attempt = BatchResult()
        try:
            with transaction.atomic():
                write_segment(self.handler, segment, attempt, new_only=self.new_only)
        except WRITE_ERRORS as exc:
            log.info(
                "bulk write of %d %s failed (%s); writing them one by one",
                len(segment.items) + len(segment.removals),
                self.handler.kind,
                exc,
            )
            for single, raw in segment.singles():
                self._write_single(single, raw)
            return
        self.result.merge(attempt)
        self._clear_skips(segment.items)

    def _write_single(self, segment: Segment, raw: Any) -> None:
        meta = _metadata(raw)
        attempt = BatchResult()
        with object_context(
            kind=self.handler.kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        ):
            try:
                with transaction.atomic():
                    write_segment(self.handler, segment, attempt)
            except WRITE_ERRORS as exc:
                self.skip(raw, exc)
                return
        self.result.merge(attempt)
        self._clear_skips(segment.items)

    def _skipped_names(self) -> set[tuple[str, str]]:
        if self._skipped is None:
            self._skipped = set(
                SkippedObject.objects.filter(kind=self.handler.kind).values_list(
                    "namespace", "name"
                )
            )
        return self._skipped

    def _clear_skips(self, items: list[Pending]) -> None:
        # A stored object is no longer skipped: its record goes.
        skipped = self._skipped_names()
        if not skipped:
            return
        for item in items:
            key = (item.namespace, item.name)
            if key in skipped:
                SkippedObject.objects.filter(
                    kind=self.handler.kind, namespace=key[0], name=key[1]
                ).delete()
                skipped.discard(key)
                self.result.unskipped += 1


def write_segment(
    handler: KindHandler, segment: Segment, result: BatchResult, *, new_only: bool = False
) -> None:
    """Remove, create and update the objects of one segment (`new_only`: none is stored)."""
    if segment.removals:
        _remove(handler, segment.removals, result)
    if not segment.items:
        return
    if not new_only:
        _load_stored(handler, segment.items)
    changed: list[Pending] = []
    for item in segment.items:
        # The stored form: a kind may keep less than the object (a pod without claims).
        if item.pk is not None and item.stored["raw"] == item.columns["raw"]:
            result.unchanged += 1
            forget_json_text(item.columns["raw"])
        else:
            changed.append(item)
    if not changed:
        return
    if handler.children is not None:
        # Only for changed objects: an unchanged one was checked when it was stored.
        for item in changed:
            item.children = handler.children(item.obj)
    if handler.prepare is not None:
        handler.prepare(changed, result)
    creates = [item for item in changed if item.pk is None]
    updates = [item for item in changed if item.pk is not None]
    written: list[Written] = []
    model = handler.model
    if creates:
        if not new_only:
            _remove_recreated(handler, creates, result)
        rows = [new_row(model, uid=item.uid, **item.columns) for item in creates]
        insert_rows(model, rows, returning=("uid",))
        result.created += len(rows)
        written.extend(Written(row, item, True) for row, item in zip(rows, creates, strict=True))
    if updates:
        now = timezone.now()
        rows = [
            new_row(model, pk=item.pk, uid=item.uid, synced_at=now, **item.columns)
            for item in updates
        ]
        names = {model._meta.get_field(key).name for item in updates for key in item.columns}
        update_rows(model, rows, [*sorted(names), "synced_at"])
        written.extend(Written(row, item, False) for row, item in zip(rows, updates, strict=True))
    if handler.written is not None:
        handler.written(written, result)
        return
    for entry in written:
        result.upserted += 1
        result.touch(handler.topic, handler.live_id(entry.row))


def _load_stored(handler: KindHandler, items: list[Pending]) -> None:
    """Fill each item's stored pk and fields; raw only where the resourceVersion matches."""
    by_uid = {item.uid: item for item in items}
    same_version: list[int] = []
    fields = ("pk", "uid", "resource_version", *handler.stored_fields)
    for part in chunks(list(by_uid)):
        for values in handler.model.objects.filter(uid__in=part).values_list(*fields):
            item = by_uid[values[1]]
            item.pk = values[0]
            item.stored = dict(zip(handler.stored_fields, values[3:], strict=True))
            # A different resourceVersion means a different object: no need to load its raw.
            item.stored["raw"] = None
            if values[2] == item.columns["resource_version"]:
                same_version.append(values[0])
    by_pk = {item.pk: item for item in items if item.pk is not None}
    for part in chunks(same_version):
        for pk, raw in handler.model.objects.filter(pk__in=part).values_list("pk", "raw"):
            by_pk[pk].stored["raw"] = raw


def _remove_recreated(handler: KindHandler, creates: list[Pending], result: BatchResult) -> None:
    # An object recreated under the same name has a new uid: the old row goes.
    wanted = {(item.namespace, item.name): item.uid for item in creates}
    fields = ["pk", "uid", "namespace", "name"] if handler.namespaced else ["pk", "uid", "name"]
    stale: list[int] = []
    rows = handler.model.objects.all()
    if handler.namespaced:
        # Names are unique per namespace only, by an index that leads with the namespace: by
        # name alone PostgreSQL read the whole index (7.5 ms a batch at 77,000 pods).
        rows = rows.filter(namespace__in=sorted({item.namespace for item in creates}))
    for part in chunks(sorted({item.name for item in creates})):
        for values in rows.filter(name__in=part).values_list(*fields):
            key = (values[2], values[3]) if handler.namespaced else ("", values[2])
            if key in wanted and wanted[key] != values[1]:
                stale.append(values[0])
    for part in chunks(stale):
        handler.delete(list(without_json(handler.model).filter(pk__in=part)), result)
    # Counted as removed: the watcher moves the kind's stored count by the batch's numbers.
    result.deleted += len(stale)


def _remove(handler: KindHandler, removals: list[Removal], result: BatchResult) -> None:
    rows: dict[str, Any] = {}
    for part in chunks([removal.uid for removal in removals]):
        for row in without_json(handler.model).filter(uid__in=part):
            rows[row.uid] = row
    doomed: dict[Any, Any] = {}
    for removal in removals:
        row = rows.get(removal.uid)
        if row is None and removal.by_name:
            lookup: JSON = {"name": removal.name}
            if handler.namespaced:
                lookup["namespace"] = removal.namespace
            row = without_json(handler.model).filter(**lookup).first()
        if row is not None:
            doomed[row.pk] = row
    handler.delete(list(doomed.values()), result)
    result.deleted += len(doomed)
