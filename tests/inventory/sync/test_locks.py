"""One watcher per kind: the lock (Redis when configured, process-local otherwise) and its use."""

from __future__ import annotations

import time
import uuid

import pytest
from django.conf import settings

from inventory.locks import LocalLock, RedisLock, watcher_lock
from inventory.models import SyncState
from inventory.sync.watch import write_guard
from inventory.tasks import watch_kind
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import wait_converged, wait_for


@pytest.mark.redis
def test_lock_backend_follows_settings() -> None:
    """With REDIS_URL the lock lives in Redis; without it, in the process."""
    lock = watcher_lock("Node", owner="x")
    assert isinstance(lock, RedisLock if settings.REDIS_URL else LocalLock)


@pytest.mark.redis
def test_lock_excludes_renews_expires_and_fences() -> None:
    """A held lock refuses others, renews for its owner, and after expiry the old owner loses it."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    first = watcher_lock(name, owner="first", ttl=0.3)
    second = watcher_lock(name, owner="second", ttl=0.3)
    assert first.acquire()
    assert not second.acquire()
    assert first.renew()
    assert second.holder() == "first"
    time.sleep(0.45)
    assert second.acquire()
    assert not first.renew(), "an expired holder must not extend another's lock"
    first.release()
    assert second.holder() == "second", "an expired holder must not free another's lock"
    second.release()
    assert first.holder() is None


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_watch_the_same_kind(server, watchers) -> None:
    """Two watchers started for one kind: one watches, the other waits and takes over later."""
    for i in range(3):
        server.apply(objects.node(f"n{i}"))
    watchers.start("Node", identity="worker-a")
    wait_converged(server, "Node")
    second = type(watchers)(watchers.client_factory)
    second.start("Node", identity="worker-b")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert server.active_watches <= 1
        with write_guard():
            assert SyncState.objects.get(kind="Node").watcher in ("worker-a", "")
        time.sleep(0.05)
    watchers.stop("Node")
    wait_for(lambda: SyncState.objects.filter(kind="Node", watcher="worker-b").exists())
    server.apply(objects.node("after-takeover"))
    wait_converged(server, "Node")
    assert server.active_watches <= 1
    second.stop()


@pytest.mark.django_db(transaction=True)
def test_watch_task_is_busy_while_another_holds_the_lock(server, kubeconfig, settings) -> None:
    """The Celery watch task exits at once when the kind is watched elsewhere."""
    settings.KUBECONFIG = str(kubeconfig)
    lock = watcher_lock("DeviceClass", owner="someone-else", ttl=5)
    assert lock.acquire()
    try:
        assert watch_kind("DeviceClass", max_seconds=1) == "busy"
    finally:
        lock.release()


@pytest.mark.django_db(transaction=True)
def test_watch_task_is_time_bounded_and_syncs(server, kubeconfig, settings) -> None:
    """The Celery watch task syncs its kind, returns after max_seconds and frees the lock."""
    settings.KUBECONFIG = str(kubeconfig)
    settings.WATCH_TIMEOUT_SECONDS = 1
    server.apply(objects.device_class("gpu"))
    assert watch_kind("DeviceClass", max_seconds=1) == "done"
    wait_converged(server, "DeviceClass", timeout=1)
    assert watcher_lock("DeviceClass", owner="probe").holder() is None
    # It stopped watching: the row names no watcher and the server's stream gets closed.
    with write_guard():
        assert SyncState.objects.get(kind="DeviceClass").watcher == ""
    wait_for(lambda: server.active_watches == 0)
