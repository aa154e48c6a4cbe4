"""List and watch loops that keep the database equal to the cluster, one loop per kind.

`loop` speaks HTTP and reads what `events` groups into batches, and writes through a
`sink.Sink`; `store.DatabaseSink` is the database side; `runner` holds the per-kind lock and
starts watchers.
"""

from inventory.sync.watch.events import (
    Batch,
    CannedSource,
    EventSource,
    Signal,
    StreamSource,
    batch_events,
)
from inventory.sync.watch.loop import Backoff, KindWatcher, RateMeter, WatchOptions
from inventory.sync.watch.runner import (
    LockKeeper,
    client_from_settings,
    default_identity,
    options_from_settings,
    run_kind,
    serve_kind,
    start_watchers,
)
from inventory.sync.watch.sink import Cursor, Listing, LostOwnership, Sink
from inventory.sync.watch.state import write_guard
from inventory.sync.watch.store import DatabaseSink

__all__ = [
    "Backoff",
    "Batch",
    "CannedSource",
    "Cursor",
    "DatabaseSink",
    "EventSource",
    "KindWatcher",
    "Listing",
    "LockKeeper",
    "LostOwnership",
    "RateMeter",
    "Signal",
    "Sink",
    "StreamSource",
    "WatchOptions",
    "batch_events",
    "client_from_settings",
    "default_identity",
    "options_from_settings",
    "run_kind",
    "serve_kind",
    "start_watchers",
    "write_guard",
]
