"""The embedded mode: sync and periodic jobs inside the web process.

Without Redis the channel layer lives in one process, so live updates reach browsers only when
the watchers run in the process that serves the websockets. `bin/run` turns this on with
DASHBOARD_EMBEDDED_SYNC=1; with Redis and Celery, workers and beat do the same work instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from dashboard import registry
from dralib.kube.kinds import KINDS
from inventory.clusters import in_default_cluster
from inventory.sync.watch import start_watchers

log = logging.getLogger(__name__)

_started = threading.Lock()
_stop = threading.Event()
_running = False


@in_default_cluster
def _periodic(name: str, interval: float, job: Callable[[], object]) -> None:
    while not _stop.wait(interval):
        try:
            job()
        except Exception:  # one failed run must not end the schedule
            log.exception("embedded job %s failed", name)
        finally:
            close_old_connections()


def embedded_jobs() -> list[tuple[str, Callable[[], object]]]:
    """The periodic tasks beat would send, as (name, callable) to run here in turn.

    A Celery task called directly runs inline; tasks whose work this mode does otherwise
    (keeping watchers running) are left out.
    """
    return [
        (task.name, import_string(task.task)) for task in registry.periodic_tasks() if task.embedded
    ]


def start() -> bool:
    """Start watchers and periodic jobs once per process; returns whether this call started them."""
    global _running
    with _started:
        if _running:
            return False

        start_watchers(list(KINDS), stop=_stop)
        for name, job in embedded_jobs():
            threading.Thread(
                target=_periodic,
                args=(name, settings.EMBEDDED_JOB_SECONDS, job),
                name=name,
                daemon=True,
            ).start()
        _running = True
        log.info("embedded sync started for %s", ", ".join(KINDS))
        return True


def stop() -> None:
    _stop.set()
