"""The entry points: one transaction per batch of watch events, relist or snapshot import."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable
from contextlib import closing
from queue import Empty, Full, Queue
from typing import Any

from django.db import transaction

from dashboard.gcpause import gc_paused
from dashboard.live import publish_changes
from dralib.kube.normalize import normalize
from inventory.sync.bulk import BatchWriter
from inventory.sync.core import (
    AFTER_COMMIT,
    JSON,
    BatchResult,
    chunks,
    handler_for,
    object_uid,
)
from inventory.sync.slices import refresh_pools


def apply_events(
    kind: str, events: Iterable[tuple[str, JSON]], *, publish: bool = True
) -> BatchResult:
    """Apply watch events (ADDED/MODIFIED/DELETED, raw objects) of one kind in one transaction."""
    handler = handler_for(kind)
    result = BatchResult()
    events, result.superseded = latest_states(events)
    # No savepoint of its own inside a caller's transaction (the watch sink's, with the cursor):
    # a failure here fails the caller's batch anyway, and a savepoint is two more round trips.
    with gc_paused(), transaction.atomic(savepoint=False):
        # One segment for the whole batch (its objects are held anyway): rows are then updated
        # in one key order per table. Two segments of a 1,000-event batch each took their
        # claims in key order, the pods watcher re-linking templates took them in one order
        # across both, and the two deadlocked.
        writer = BatchWriter(handler, result, segment_size=len(events))
        for event_type, raw in events:
            if event_type == "DELETED":
                writer.remove(raw)
            else:
                writer.upsert(raw)
        writer.flush()
        _finish(result, publish=publish)
    return result


def latest_states(events: Iterable[tuple[str, JSON]]) -> tuple[list[tuple[str, JSON]], int]:
    """Drop every state of an object that a later event of the same batch replaces.

    A row is written whole, so only an object's last state in a batch matters, and a DELETED
    event removes it whatever came before. Status updates come in bursts (a quota's `used` with
    every claim), so this spares normalizing states that are never written. Returns the kept
    events in order and how many were dropped; an object without usable metadata is kept for
    the writer to report.
    """
    events = list(events)
    keys: list[tuple[str, str, str] | None] = []
    last: dict[tuple[str, str, str], int] = {}
    for index, (_, raw) in enumerate(events):
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        if not isinstance(meta, dict):
            keys.append(None)
            continue
        key = (object_uid(raw), str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        keys.append(key)
        last[key] = index
    if len(last) == len(events):
        return events, 0
    kept = [
        event
        for index, (event, key) in enumerate(zip(events, keys, strict=True))
        if key is None or event[0] == "DELETED" or last[key] == index
    ]
    return kept, len(events) - len(kept)


def upsert_events(
    kind: str, pairs: Iterable[tuple[JSON, JSON | None]], *, publish: bool = True
) -> BatchResult:
    """Upsert (raw, normalized-or-None) objects of one kind in one transaction."""
    with gc_paused(), transaction.atomic(savepoint=False):
        replacement = Replacement(kind, keep_missing=True)
        for raw, obj in pairs:
            replacement.add(raw, obj)
        return replacement.finish(publish=publish)


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
    with gc_paused(), transaction.atomic(savepoint=False):
        replacement = Replacement(kind, scope_namespace=scope_namespace)
        # Consumed once, so a caller's generator can let go of each object once it is written.
        if isinstance(pairs, list | tuple):
            for raw, obj in pairs:
                replacement.add(raw, obj)
        else:
            with closing(prefetched(pairs)) as objects:
                for raw, obj in objects:
                    replacement.add(raw, obj)
        return replacement.finish(publish=publish)


# Objects a relist's reader may be ahead of its writer (two list pages).
PREFETCH_OBJECTS = 1000


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_END = object()


def prefetched(pairs: Iterable[tuple[JSON, JSON | None]]) -> Generator[tuple[JSON, JSON | None]]:
    """`pairs`, read and normalized by a thread of its own at most PREFETCH_OBJECTS ahead.

    A relist's pages were fetched, parsed and normalized while the database waited, and
    written while the API server waited: each page's time was the sum of both. The reader
    touches no database (the writer's transaction is this thread's); an object that fails to
    normalize is handed on as it came, for the writer to normalize again and record. What the
    reader raises (a page the server refused) is raised here, in order.
    """
    queue: Queue[Any] = Queue(maxsize=PREFETCH_OBJECTS)
    stopped = threading.Event()

    def put(item: Any) -> bool:
        while not stopped.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def read() -> None:
        try:
            for raw, obj in pairs:
                if obj is None:
                    try:
                        obj = normalize(raw)
                    except Exception:  # noqa: BLE001 - the writer normalizes it again and records
                        obj = None
                if not put((raw, obj)):
                    return
        except BaseException as exc:  # noqa: BLE001 - raised again in the writer's thread
            put(_Failed(exc))
            return
        put(_END)

    reader = threading.Thread(target=read, name="relist-reader", daemon=True)
    reader.start()
    try:
        while True:
            try:
                item = queue.get(timeout=0.5)
            except Empty:
                if not reader.is_alive() and queue.empty():
                    raise RuntimeError("the relist reader stopped without a word") from None
                continue
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item
    finally:
        stopped.set()
        reader.join()


class Replacement:
    """`replace_all` (or, keeping missing objects, `upsert_events`) fed one object at a time,
    inside the caller's transaction.

    Objects are written in segments as they come, so a caller reading a large input holds a
    segment, not the input; several kinds may be fed side by side (a snapshot import reads
    them in the file's order) and each finished when its last object is in.
    """

    def __init__(
        self, kind: str, *, keep_missing: bool = False, scope_namespace: str | None = None
    ) -> None:
        self.handler = handler_for(kind)
        self.result = BatchResult()
        # Nothing stored of the kind (the initial sync, a first import): every object is new,
        # so none is looked up before it is written, and none can be stale at the end.
        self.was_empty = not self.handler.model.objects.exists()
        self.writer = BatchWriter(self.handler, self.result, new_only=self.was_empty)
        self.keep_missing = keep_missing
        self.scope_namespace = scope_namespace
        self.seen: set[str] = set()

    def add(self, raw: JSON, obj: JSON | None = None) -> None:
        """Queue one object (normalized here when `obj` is None); written with its segment."""
        if not self.keep_missing and not self.was_empty:
            self.seen.add(object_uid(raw))
        self.writer.upsert(raw, obj)

    def finish(self, *, publish: bool = True) -> BatchResult:
        """Write what is queued, delete what was not seen (unless kept), recompute pools."""
        self.writer.flush()
        result, handler = self.result, self.handler
        if not self.keep_missing and not self.was_empty:
            stored = handler.model.objects.all()
            if self.scope_namespace is not None:
                stored = stored.filter(namespace=self.scope_namespace)
            # Compare in Python: a NOT IN over thousands of uids exceeds SQLite's parameter
            # limit.
            stale_pks = [pk for pk, uid in stored.values_list("pk", "uid") if uid not in self.seen]
            for part in chunks(stale_pks):
                rows = list(handler.model.objects.filter(pk__in=part))
                handler.delete(rows, result)
                result.deleted += len(rows)
        _finish(result, publish=publish)
        return result


def _finish(result: BatchResult, *, publish: bool) -> None:
    if result.dirty_pools:
        refresh_pools(result.dirty_pools, result)
    result.dirty_pools.clear()
    if publish:
        _publish(result)
    if result.changed:
        for hook in AFTER_COMMIT:
            transaction.on_commit(lambda hook=hook: hook(result))


def _publish(result: BatchResult) -> None:
    publish_changes({topic: sorted(ids) for topic, ids in result.changed.items() if ids})
