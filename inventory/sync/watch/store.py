"""The database side of the watch loop: a `Sink` that writes one kind through `inventory.sync`.

Every write is one transaction under the SQLite write guard, here and nowhere else; it is
fenced on the kind's SyncState row (`state.fenced_update`): a watcher that lost the kind to
another rolls its batch back. How a batch is written is decided in this module.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import close_old_connections, connection, transaction

from dashboard import scope
from inventory.clusters import cluster_id as default_cluster_id
from inventory.sync import apply_events, replace_all
from inventory.sync.watch import state
from inventory.sync.watch.sink import JSON, Cursor, Listing

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def give_back() -> None:
    """Close the thread's connection if the settings keep none between uses.

    A watcher thread waits on its stream between writes, most of the time. With PostgreSQL's
    pool (`DASHBOARD_DATABASE_POOL_SIZE`, CONN_MAX_AGE 0) a connection held meanwhile is one
    the pool cannot lend: fifteen kinds' watchers in one process held ten pooled connections
    and the other five waited up to the pool's timeout for each batch (ingest fell from
    ~2,700 to ~100 events/s). Closing a pooled connection returns it; a connection the
    settings keep (CONN_MAX_AGE) is left alone, and none is closed inside a transaction.
    """
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


def _then_give_back(write: Callable[P, R]) -> Callable[P, R]:
    """A sink's write, in its cluster's scope; the connection given back after."""

    @functools.wraps(write)
    def written(*args: P.args, **kwargs: P.kwargs) -> R:
        sink = args[0]
        assert isinstance(sink, DatabaseSink)
        try:
            with scope.use(sink.cluster_id):
                return write(*args, **kwargs)
        finally:
            give_back()

    return written


class DatabaseSink:
    """Writes one kind's objects and its SyncState for the watcher named `watcher`, in one
    cluster: `cluster_id`, else the scope it was made in, else the default cluster."""

    def __init__(self, kind: str, *, watcher: str, cluster_id: int | None = None) -> None:
        self.kind = kind
        self.watcher = watcher
        if cluster_id is None:
            cluster_id = scope.get()
        self.cluster_id = cluster_id if cluster_id is not None else default_cluster_id()

    @_then_give_back
    def open(self) -> Cursor:
        with state.write_guard():
            stored = state.claim_kind(self.kind, watcher=self.watcher)
        return Cursor(
            resource_version=stored.resource_version,
            served_version=stored.served_version,
            cluster_uid=stored.cluster_uid,
            valid=stored.cursor_valid,
        )

    @_then_give_back
    def close(self) -> None:
        with state.write_guard():
            state.release_kind(self.kind, watcher=self.watcher)

    @_then_give_back
    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        close_old_connections()
        # One transaction for the whole list, its pages fetched while it is open: readers see
        # the old objects until the commit, and a page the server refuses rolls it all back.
        # On SQLite the write guard is held meanwhile, as SQLite has one writer anyway.
        with state.write_guard(), transaction.atomic():
            replace_all(self.kind, ((raw, None) for raw in listing.items))
            state.record_list(
                self.kind,
                watcher=self.watcher,
                served_version=served_version,
                resource_version=listing.resource_version,
                cluster_uid=cluster_uid,
            )

    @_then_give_back
    def apply(self, events: list[tuple[str, JSON]], *, resource_version: str, rate: float) -> None:
        close_old_connections()
        with state.write_guard(), transaction.atomic():
            result = apply_events(self.kind, events)
            state.record_batch(
                self.kind,
                watcher=self.watcher,
                result=result,
                resource_version=resource_version,
                events=len(events),
                rate=rate,
            )

    @_then_give_back
    def bookmark(self, *, rate: float) -> None:
        with state.write_guard(), transaction.atomic():
            state.heartbeat(self.kind, watcher=self.watcher, rate=rate)

    @_then_give_back
    def verified(self) -> None:
        with state.write_guard(), transaction.atomic():
            state.record_verified(self.kind, watcher=self.watcher)

    @_then_give_back
    def cursor_invalid(self) -> None:
        # Called from error handling: never raises for a lost row; the next commit notices.
        with state.write_guard():
            state.record_cursor_invalid(self.kind, watcher=self.watcher)

    @_then_give_back
    def cluster_seen(self, cluster_uid: str) -> None:
        with state.write_guard(), transaction.atomic():
            state.record_cluster(self.kind, watcher=self.watcher, cluster_uid=cluster_uid)

    @_then_give_back
    def cluster_changed(self, cluster_uid: str) -> None:
        # A transaction of its own: the other cluster's objects are gone even if the next
        # list fails, and the cursor goes with them.
        with state.write_guard(), transaction.atomic():
            replace_all(self.kind, [])
            state.record_cluster_changed(self.kind, watcher=self.watcher, cluster_uid=cluster_uid)

    @_then_give_back
    def not_served(self, message: str) -> None:
        with state.write_guard(), transaction.atomic():
            # The cluster has none of these: the database must not keep any either.
            replace_all(self.kind, [])
            state.record_not_served(self.kind, watcher=self.watcher, message=message)

    @_then_give_back
    def error(self, message: str) -> None:
        try:
            with state.write_guard():
                state.record_error(self.kind, watcher=self.watcher, message=message)
        except Exception:  # noqa: BLE001 - the database may be what failed
            log.exception("%s: could not record the error", self.kind)

    def idle(self) -> None:
        close_old_connections()
