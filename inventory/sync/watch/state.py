"""SyncState bookkeeping for the watch loop: what each report writes to the kind's row.

Every update is fenced: the SyncState row is updated only where `watcher` still names this
watcher, and a zero row count (another watcher took the kind over) raises LostOwnership, which
rolls back the transaction the caller (`store.DatabaseSink`, which owns every transaction and
the SQLite write guard) opened around it.

Health is stored as it is: any success (a committed batch, a list, a cursor check) clears
`last_error`; "not served" is neutral (`served=False`, `not_served_reason`), not an error; the
cursor is marked not valid as soon as the server proves it wrong, until the relist. Readers
use `SyncState.health` and `SyncState.is_stale()`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import F
from django.utils import timezone

from dashboard.live import publish_changes
from inventory.models import SkippedObject, SyncState
from inventory.sync import BatchResult, handler_for
from inventory.sync.watch.sink import LostOwnership

# SQLite allows one writer at a time and fails fast on lock upgrades between threads of one
# process; serialising writes in-process keeps the embedded mode free of "database is locked".
_SQLITE_WRITES = threading.RLock()


@contextlib.contextmanager
def write_guard() -> Iterator[None]:
    """Serialise writes on SQLite; no-op on PostgreSQL, which handles concurrent writers."""
    if connection.vendor == "sqlite":
        with _SQLITE_WRITES:
            yield
    else:
        yield


def claim_kind(kind: str, *, watcher: str) -> SyncState:
    """Make `watcher` the owner of the kind's SyncState row (after taking the lock)."""
    state: SyncState = SyncState.objects.get_or_create(kind=kind)[0]
    SyncState.objects.filter(kind=kind).update(watcher=watcher, heartbeat_at=timezone.now())
    state.refresh_from_db()
    return state


def _counts(kind: str) -> dict[str, Any]:
    return {
        "object_count": handler_for(kind).model.objects.count(),
        "skipped": SkippedObject.objects.filter(kind=kind).count(),
    }


def _moved_counts(kind: str, result: BatchResult) -> dict[str, Any]:
    """The stored counts after a batch, from what it created and removed where that is exact.

    The kind's rows are written only by the watcher that owns it, in this transaction, so the
    batch's own numbers move the count: a COUNT(*) read the whole table (tens of ms for 77,000
    pods) in every batch that created or deleted a row. A relist counts the table again
    (`record_list`), which also ends any drift. Skip records are counted (few, by kind): an
    object skipped twice updates its record, so the batch's numbers do not say how many came.
    """
    fields: dict[str, Any] = {}
    moved = result.created - result.deleted - result.trimmed
    if moved:
        fields["object_count"] = F("object_count") + moved
    if result.skipped or result.unskipped:
        fields["skipped"] = SkippedObject.objects.filter(kind=kind).count()
    return fields


def fenced_update(kind: str, *, watcher: str, publish: bool = True, **fields: Any) -> None:
    """Update the SyncState row if `watcher` still owns it; LostOwnership otherwise.

    The Sync page and the overview follow the `sync` topic: every change but a heartbeat is
    published once the transaction commits.
    """
    if not SyncState.objects.filter(kind=kind, watcher=watcher).update(**fields):
        raise LostOwnership(f"{kind}: another watcher owns this kind now")
    if publish:
        publish_changes({"sync": [kind]})


def _unfenced_update(kind: str, owner: str, /, **fields: Any) -> None:
    # Called from error handling and shutdown: never raises for a lost row.
    if SyncState.objects.filter(kind=kind, watcher=owner).update(**fields):
        publish_changes({"sync": [kind]})


def record_batch(
    kind: str,
    *,
    watcher: str,
    result: BatchResult,
    resource_version: str,
    events: int,
    rate: float,
) -> None:
    """Store the cursor and counters of a committed batch (inside its transaction)."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "resource_version": resource_version,
        "heartbeat_at": now,
        "events_per_second": rate,
        # The stream works: whatever failed before is over.
        "last_error": "",
    }
    if events:
        fields.update(last_event_at=now, events_total=F("events_total") + events)
        fields.update(_moved_counts(kind, result))
    fenced_update(kind, watcher=watcher, **fields)


def record_list(
    kind: str,
    *,
    watcher: str,
    served_version: str,
    resource_version: str,
    cluster_uid: str | None = None,
) -> None:
    """Store the cursor after a relist (inside the replace_all transaction)."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "served": True,
        "not_served_reason": "",
        "served_version": served_version,
        "resource_version": resource_version,
        "cursor_valid": True,
        "verified_at": now,
        "last_list_at": now,
        "heartbeat_at": now,
        "last_error": "",
    }
    if cluster_uid:
        fields["cluster_uid"] = cluster_uid
    fenced_update(kind, watcher=watcher, **fields, **_counts(kind))


def record_verified(kind: str, *, watcher: str) -> None:
    """The server confirmed the stored cursor (it is not ahead of the server's data)."""
    now = timezone.now()
    fenced_update(
        kind, watcher=watcher, cursor_valid=True, verified_at=now, heartbeat_at=now, last_error=""
    )


def record_cursor_invalid(kind: str, *, watcher: str) -> None:
    """The server proved the stored cursor wrong: the kind is stale until the relist.

    Never raises for a lost row (it is called from error handling); the next commit notices.
    """
    _unfenced_update(kind, watcher, cursor_valid=False, heartbeat_at=timezone.now())


def record_cluster(kind: str, *, watcher: str, cluster_uid: str) -> None:
    """Note which cluster (kube-system namespace uid) the stored objects come from."""
    fenced_update(kind, watcher=watcher, cluster_uid=cluster_uid)


def record_cluster_changed(kind: str, *, watcher: str, cluster_uid: str) -> None:
    """Another cluster answers now: its uid, and no cursor (the objects were just dropped)."""
    fenced_update(
        kind,
        watcher=watcher,
        cluster_uid=cluster_uid,
        resource_version="",
        cursor_valid=False,
        heartbeat_at=timezone.now(),
        **_counts(kind),
    )


def record_not_served(kind: str, *, watcher: str, message: str) -> None:
    """Note that the server serves no known version of the kind: neutral, not an error."""
    now = timezone.now()
    fenced_update(
        kind,
        watcher=watcher,
        served=False,
        not_served_reason=message,
        served_version="",
        resource_version="",
        cursor_valid=False,
        last_error="",
        heartbeat_at=now,
        **_counts(kind),
    )


def record_error(kind: str, *, watcher: str, message: str) -> None:
    """Note an error; never raises for a lost row, the loop's next commit will notice that."""
    _unfenced_update(kind, watcher, last_error=message[:2000], last_error_at=timezone.now())


def heartbeat(kind: str, *, watcher: str, rate: float) -> None:
    """Show the watcher is alive between batches and store its event rate (fenced)."""
    fenced_update(
        kind, watcher=watcher, publish=False, heartbeat_at=timezone.now(), events_per_second=rate
    )


def release_kind(kind: str, *, watcher: str) -> None:
    """Clear the watcher name when stopping, so status pages show nobody is watching."""
    _unfenced_update(kind, watcher, watcher="")


def stale_kinds(*, max_age: timedelta | None = None) -> list[str]:
    """Kinds whose stored objects may differ from the cluster (see `SyncState.is_stale`)."""
    now = timezone.now()
    return [s.kind for s in SyncState.objects.all() if s.is_stale(now=now, max_age=max_age)]
