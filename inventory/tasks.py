"""Celery tasks that keep one watcher per kind running across the workers.

`watch_kind` watches one kind for at most `max_seconds` while holding the kind's lease, then exits
(releasing it) and queues its successor, which resumes from the stored resourceVersion. Workers
adopt free leases themselves (`inventory.leases`): each worker consuming the watch queue checks at
start and every half lease, so no beat is needed. Beat's `ensure_watchers` does the same check
every 30 seconds, a harmless extra.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from celery import current_app, shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings

from dralib.kube.kinds import KINDS
from inventory.clusters import in_default_cluster
from inventory.leases import LeaseSupervisor, adopt_free
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


def _queue_watcher(kind: str, max_seconds: int = WATCH_MAX_SECONDS) -> None:
    watch_kind.apply_async((kind, max_seconds), queue=settings.WATCH_QUEUE)


@worker_ready.connect
def _adopt_watchers(sender: Any = None, **kwargs: Any) -> None:
    """Start this worker's lease supervisor; it adopts only while the worker consumes the
    watch queue (`--queues`, or `celery control add_consumer` / `cancel_consumer` at runtime)."""
    if _eager():
        return
    app = getattr(sender, "app", None) or current_app
    LeaseSupervisor(
        kinds=KINDS,
        owner=f"{socket.gethostname()}:{os.getpid()}",
        start=_queue_watcher,
        consumes=lambda: settings.WATCH_QUEUE in app.amqp.queues.consume_from,
        period=settings.WATCH_LEASE_SECONDS / 2,
        stop=SHUTDOWN,
    ).start()


@shared_task(ignore_result=True, acks_late=False)
@in_default_cluster
def watch_kind(kind: str, max_seconds: int = WATCH_MAX_SECONDS) -> str:
    """Watch one kind for at most `max_seconds`; "busy" when another worker watches it."""
    if kind not in KINDS:
        log.warning("watch_kind: unknown kind %r, ignored", kind)
        return "unknown"
    deadline = time.monotonic() + max(int(max_seconds), 1)
    held = run_kind(
        kind,
        stop=SHUTDOWN,
        deadline=deadline,
        wait_for_lock=False,
        lock_ttl=settings.WATCH_LEASE_SECONDS,
    )
    if not held:
        return "busy"
    if not SHUTDOWN.is_set() and not _eager():
        # Hand over at once instead of waiting for a supervisor's check; a duplicate exits busy.
        _queue_watcher(kind, max_seconds)
    return "done"


@shared_task(ignore_result=True)
@in_default_cluster
def ensure_watchers(max_seconds: int = WATCH_MAX_SECONDS) -> list[str]:
    """Queue a watcher for every kind nobody is watching; returns the kinds queued.

    The workers' own supervisors do this too; from beat it only adds a check every 30 s.
    """
    if _eager():
        # Inline tasks would block here for max_seconds per kind: that is run_sync's job.
        log.warning("ensure_watchers: no Celery worker (eager mode); use `manage.py run_sync`")
        return []
    adoption = adopt_free(
        KINDS,
        owner="beat",
        start=lambda kind: _queue_watcher(kind, max_seconds),
        hold=settings.WATCH_LEASE_SECONDS / 2,
    )
    return adoption.started
