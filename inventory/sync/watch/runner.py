"""Run watchers under the per-kind lock: one watcher per kind across every worker.

`run_kind` takes the kind's lock (waiting for it, or not), keeps it renewed from a small thread
while the watcher runs, and releases it when the watcher stops. `serve_kind` repeats that until
asked to stop, so a standby process takes over when the active watcher dies.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection

from dralib.kube.client import KubeClient, load_client
from dralib.kube.discovery import Discovery
from dralib.kube.kinds import kind_spec
from inventory.clusters import in_default_cluster
from inventory.locks import WatcherLock, watcher_lock
from inventory.sync.watch.loop import KindWatcher, WatchOptions
from inventory.sync.watch.store import DatabaseSink

log = logging.getLogger(__name__)

LOCK_TTL = 30.0


def client_from_settings() -> KubeClient:
    """The KubeClient the settings describe (KUBECONFIG, KUBE_CONTEXT, KUBE_IN_CLUSTER)."""
    return load_client(
        kubeconfig=settings.KUBECONFIG or None,
        context=settings.KUBE_CONTEXT or None,
        in_cluster=settings.KUBE_IN_CLUSTER,
    )


def options_from_settings(**overrides: Any) -> WatchOptions:
    """WatchOptions with the settings' watch timeout and list page size."""
    values: dict[str, Any] = {
        "timeout_seconds": settings.WATCH_TIMEOUT_SECONDS,
        "page_size": settings.LIST_PAGE_SIZE,
    }
    values.update(overrides)
    return WatchOptions(**values)


def default_identity(kind: str) -> str:
    """host:pid:kind:random, unique per watcher run, shown in SyncState.watcher."""
    return f"{socket.gethostname()}:{os.getpid()}:{kind}:{uuid.uuid4().hex[:6]}"


class LockKeeper:
    """Renews a held lock every ttl/3 seconds; sets `lost` when renewal fails."""

    def __init__(self, lock: WatcherLock) -> None:
        self.lock = lock
        self.lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lock-keeper:{lock.name}", daemon=True
        )

    def __enter__(self) -> LockKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._done.wait(self.lock.ttl / 3):
            try:
                renewed = self.lock.renew()
            except Exception:  # noqa: BLE001 - Redis away: the lock may be expiring
                log.exception("%s: renewing the watcher lock failed", self.lock.name)
                continue
            if not renewed:
                log.warning("%s: watcher lock lost to %s", self.lock.name, self.lock.holder())
                self.lost.set()
                return


@in_default_cluster
def run_kind(
    kind: str,
    *,
    stop: threading.Event,
    identity: str | None = None,
    options: WatchOptions | None = None,
    client_factory: Callable[[], KubeClient] = client_from_settings,
    deadline: float | None = None,
    wait_for_lock: bool = True,
    lock_ttl: float = LOCK_TTL,
    lock_retry: float = 5.0,
    discovery: Discovery | None = None,
) -> bool:
    """Watch `kind` while holding its lock; False when the lock could not be had."""
    spec = kind_spec(kind)
    identity = identity or default_identity(kind)
    lock = watcher_lock(kind, owner=identity, ttl=lock_ttl)
    while not lock.acquire():
        if not wait_for_lock or stop.wait(lock_retry):
            return False
        if deadline is not None and time.monotonic() >= deadline:
            return False
    log.info("%s: watching as %s", kind, identity)
    try:
        with LockKeeper(lock) as keeper:
            watcher = KindWatcher(
                spec,
                client_factory=client_factory,
                sink=DatabaseSink(kind, watcher=identity),
                stop=stop,
                options=options or options_from_settings(),
                lock_lost=keeper.lost,
                discovery=discovery,
            )
            watcher.run(deadline=deadline)
    finally:
        try:
            lock.release()
        except Exception:  # noqa: BLE001 - it expires on its own
            log.exception("%s: releasing the watcher lock failed", kind)
        connection.close()
    return True


@in_default_cluster
def serve_kind(
    kind: str,
    *,
    stop: threading.Event,
    options: WatchOptions | None = None,
    client_factory: Callable[[], KubeClient] = client_from_settings,
    lock_ttl: float = LOCK_TTL,
    lock_retry: float = 5.0,
    discovery: Discovery | None = None,
) -> None:
    """Watch `kind` whenever this process can hold its lock, until `stop` is set."""
    while not stop.is_set():
        try:
            run_kind(
                kind,
                stop=stop,
                options=options,
                client_factory=client_factory,
                lock_ttl=lock_ttl,
                lock_retry=lock_retry,
                discovery=discovery,
            )
        except Exception:  # noqa: BLE001 - e.g. Redis away: keep the thread alive
            log.exception("%s: watcher failed", kind)
        stop.wait(lock_retry)


def start_watchers(
    kinds: list[str], *, stop: threading.Event, options: WatchOptions | None = None
) -> list[threading.Thread]:
    """One daemon thread per kind running `serve_kind` until `stop` is set; the watchers of
    the process's cluster share one discovery."""
    watch_options = options or options_from_settings()
    discovery = Discovery()
    threads = [
        threading.Thread(
            target=serve_kind,
            kwargs={
                "kind": kind,
                "stop": stop,
                "options": watch_options,
                "discovery": discovery,
            },
            name=f"watch:{kind}",
            daemon=True,
        )
        for kind in kinds
    ]
    for thread in threads:
        thread.start()
    return threads
