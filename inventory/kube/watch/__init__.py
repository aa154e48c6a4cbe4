"""List and watch loops that keep the database equal to the cluster, one loop per kind."""

from inventory.kube.watch.batching import (
    Batch,
    CannedSource,
    EventSource,
    Signal,
    StreamSource,
    batch_events,
)
from inventory.kube.watch.loop import Backoff, KindWatcher, WatchOptions
from inventory.kube.watch.runner import (
    LockKeeper,
    default_identity,
    run_kind,
    serve_kind,
    start_watchers,
)
from inventory.kube.watch.state import LostOwnership, write_guard

__all__ = [
    "Backoff",
    "Batch",
    "CannedSource",
    "EventSource",
    "KindWatcher",
    "LockKeeper",
    "LostOwnership",
    "Signal",
    "StreamSource",
    "WatchOptions",
    "batch_events",
    "default_identity",
    "run_kind",
    "serve_kind",
    "start_watchers",
    "write_guard",
]
