"""Celery tasks that keep one watcher per kind running across the workers.

`watch_kind` watches one kind for at most `max_seconds` while holding the kind's lock, then exits
(releasing it) and queues its successor, which resumes from the stored resourceVersion. The beat
task `ensure_watchers` runs every 30 seconds and queues a watcher for every kind whose lock nobody
holds, so a watcher whose worker died is back within a minute (lock expiry plus one beat).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import current_app, shared_task
from celery.signals import worker_shutting_down

from dralib.kube.kinds import KINDS
from inventory.locks import watcher_lock
from inventory.sync.watch import run_kind

log = logging.getLogger(__name__)

WATCH_MAX_SECONDS = 300

# Set when the worker begins a warm shutdown: watchers stop after their current batch.
SHUTDOWN = threading.Event()


@worker_shutting_down.connect
def _stop_watchers(**kwargs: Any) -> None:
    SHUTDOWN.set()


def _eager() -> bool:
    return bool(current_app.conf.task_always_eager)


@shared_task(ignore_result=True, acks_late=False)
def watch_kind(kind: str, max_seconds: int = WATCH_MAX_SECONDS) -> str:
    """Watch one kind for at most `max_seconds`; "busy" when another worker watches it."""
    if kind not in KINDS:
        log.warning("watch_kind: unknown kind %r, ignored", kind)
        return "unknown"
    deadline = time.monotonic() + max(int(max_seconds), 1)
    if not run_kind(kind, stop=SHUTDOWN, deadline=deadline, wait_for_lock=False):
        return "busy"
    if not SHUTDOWN.is_set() and not _eager():
        # Hand over at once instead of waiting for the next beat; a duplicate exits as busy.
        watch_kind.delay(kind, max_seconds)
    return "done"


@shared_task(ignore_result=True)
def ensure_watchers(max_seconds: int = WATCH_MAX_SECONDS) -> list[str]:
    """Queue a watcher for every kind nobody is watching; returns the kinds queued."""
    if _eager():
        # Inline tasks would block here for max_seconds per kind: that is run_sync's job.
        log.warning("ensure_watchers: no Celery worker (eager mode); use `manage.py run_sync`")
        return []
    queued = []
    for kind in KINDS:
        if watcher_lock(kind, owner="beat").holder() is None:
            watch_kind.delay(kind, max_seconds)
            queued.append(kind)
    return queued
