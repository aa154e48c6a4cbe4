"""Fixtures for sync tests: a fake API server on real HTTP, a client for it, watcher threads."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard import scope
from dralib.kube.client import KubeClient, load_client
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.sync import handler_for
from inventory.sync.watch import WatchOptions, run_kind, write_guard
from inventory.sync.watch import state as watch_state
from tests.paths import free_port

# Short timings so faults resolve in well under a second each.
FAST = WatchOptions(
    timeout_seconds=3,
    read_timeout=1.5,
    page_size=2,
    max_events=50,
    max_delay=0.05,
    backoff_base=0.05,
    backoff_cap=0.4,
    not_served_poll=0.5,
    heartbeat_every=0.5,
)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.3, too_large_wait=0.2) as fake:
        yield fake


@pytest.fixture
def kubeconfig(server: FakeApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def client_factory(kubeconfig: Path) -> Callable[[], KubeClient]:
    return lambda: load_client(kubeconfig=kubeconfig)


@pytest.fixture
def recorded_errors(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(kind, message) of every error the watchers record; SyncState keeps only current ones."""
    seen: list[tuple[str, str]] = []
    record_error = watch_state.record_error

    def spy(kind: str, *, watcher: str, message: str) -> None:
        seen.append((kind, message))
        record_error(kind, watcher=watcher, message=message)

    monkeypatch.setattr(watch_state, "record_error", spy)
    return seen


class Watchers:
    """Watcher threads (run_kind) for chosen kinds, each with its own stop event."""

    def __init__(self, client_factory: Callable[[], KubeClient]) -> None:
        self.client_factory = client_factory
        self.threads: dict[str, tuple[threading.Thread, threading.Event]] = {}

    def start(self, *kinds: str, options: WatchOptions = FAST, identity: str | None = None) -> None:
        for kind in kinds:
            stop = threading.Event()
            thread = threading.Thread(
                target=scope.carried(run_kind),
                kwargs={
                    "kind": kind,
                    "stop": stop,
                    "options": options,
                    "client_factory": self.client_factory,
                    "identity": identity,
                    "lock_retry": 0.1,
                    "lock_ttl": 5.0,
                },
                name=f"test-watch:{kind}",
                daemon=True,
            )
            thread.start()
            self.threads[kind] = (thread, stop)

    def stop(self, *kinds: str) -> None:
        for kind in kinds or tuple(self.threads):
            thread, stop = self.threads.pop(kind)
            stop.set()
            thread.join(timeout=10)
            assert not thread.is_alive(), f"watcher for {kind} did not stop"


@pytest.fixture
def watchers(client_factory: Callable[[], KubeClient]) -> Iterator[Watchers]:
    running = Watchers(client_factory)
    yield running
    with contextlib.suppress(AssertionError):
        running.stop()


def server_state(server: FakeApiServer, kind: str) -> dict[str, str]:
    """uid -> resourceVersion of the objects the database should hold for `kind`."""
    spec = KINDS[kind]
    state = {}
    for obj in server.objects(spec.plural):
        state[obj["metadata"]["uid"]] = obj["metadata"]["resourceVersion"]
    return state


def db_state(kind: str) -> dict[str, str]:
    """uid -> resourceVersion of the rows stored for `kind`."""
    with write_guard():
        rows = handler_for(kind).model.objects.values_list("uid", "resource_version")
        return dict(rows)


def wait_for(check: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy; fail with its last value on timeout.

    Checks read under the watchers' write guard: on shared-cache SQLite a read while a watcher
    thread writes fails with "database table is locked".
    """

    def guarded() -> Any:
        with write_guard():
            return check()

    deadline = time.monotonic() + timeout
    value = guarded()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = guarded()
    assert value, f"condition not met within {timeout}s: {check}"
    return value


def wait_converged(server: FakeApiServer, *kinds: str, timeout: float = 10.0) -> None:
    """Wait until the database equals the server, uid and resourceVersion, for every kind."""

    def equal() -> bool:
        return all(db_state(kind) == server_state(server, kind) for kind in kinds)

    deadline = time.monotonic() + timeout
    while not equal():
        if time.monotonic() > deadline:
            for kind in kinds:
                stored, wanted = db_state(kind), server_state(server, kind)
                assert stored == wanted, f"{kind} differs from the server"
        time.sleep(0.05)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A redis-server of this test's own on a free loopback port, for worker processes."""
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(timeout=10)
