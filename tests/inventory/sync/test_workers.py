"""Sync workers as separate processes: killed with SIGKILL mid-batch, and two racing for a kind.

Each worker (`tests.inventory.sync.worker`) runs the real watchers against the fake API server
over HTTP, writes to a SQLite file of its own and takes the per-kind locks in a throwaway Redis,
as Celery workers do in production. The database is compared with the server object for object
(uid and resourceVersion) with plain sqlite3, from outside the workers.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from dashboard import scope
from dralib.kube.fakeapi import FakeApiServer
from inventory.locks import LOCK_PREFIX
from inventory.sync import handler_for
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import server_state
from tests.paths import ROOT

# Each test starts its own Redis (and PostgreSQL) and worker processes: run once (bin/test).
pytestmark = pytest.mark.once

KINDS = ("Node", "ResourceClaim")
LOCK_TTL = 2.0


@pytest.fixture
def database(tmp_path: Path, redis_url: str) -> Path:
    path = tmp_path / "workers.sqlite3"
    _run_worker(path, redis_url, "--migrate").wait(timeout=120)
    assert path.exists()
    return path


def _run_worker(
    database: Path, redis_url: str, *args: str, kubeconfig: Path | None = None
) -> subprocess.Popen[bytes]:
    return _run_worker_url(f"sqlite:///{database}", redis_url, *args, kubeconfig=kubeconfig)


def _stored(database: Path, kind: str) -> dict[str, str]:
    table = handler_for(kind).model._meta.db_table
    with sqlite3.connect(database, timeout=30) as connection:
        return dict(connection.execute(f"SELECT uid, resource_version FROM {table}"))  # noqa: S608


def _wait_converged(server: FakeApiServer, database: Path, *, timeout: float) -> None:
    """Wait until the file database equals the server for every kind; fails past `timeout`."""
    started = time.monotonic()
    while True:
        differing = [k for k in KINDS if _stored(database, k) != server_state(server, k)]
        if not differing:
            return
        assert time.monotonic() - started < timeout, f"{differing} differ from the server"
        time.sleep(0.1)


def _churn(server: FakeApiServer, stop: threading.Event) -> None:
    step = 0
    while not stop.is_set():
        step += 1
        server.apply(objects.node(f"churn-{step}"))
        server.apply(objects.resource_claim("team-a", f"churn-{step}"))
        server.apply(objects.node("node-0", ready=step % 2 == 0))
        if step > 3:
            server.delete("nodes", name=f"churn-{step - 3}")
            server.delete("resourceclaims", name=f"churn-{step - 3}", namespace="team-a")
        time.sleep(0.01)


def _populate(server: FakeApiServer, count: int = 30) -> None:
    for i in range(count):
        server.apply(objects.node(f"node-{i}"))
        server.apply(objects.resource_claim("team-a", f"claim-{i}"))


def _owner(redis_url: str, kind: str) -> str:
    value = redis.Redis.from_url(redis_url).get(LOCK_PREFIX + kind)
    return value.decode() if value else ""


def test_worker_killed_mid_batch_then_a_new_one_converges(server, tmp_path, database, redis_url):
    """SIGKILL while events stream in; a new worker takes over and the database converges."""
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    _populate(server)
    stop = threading.Event()
    churner = threading.Thread(target=scope.carried(_churn), args=(server, stop), daemon=True)
    first = _run_worker(database, redis_url, "--identity", "first", kubeconfig=kubeconfig)
    try:
        deadline = time.monotonic() + 60
        while len(_stored(database, "Node")) < 10:
            assert time.monotonic() < deadline, "the first worker never wrote"
            time.sleep(0.1)
        churner.start()
        time.sleep(1.0)  # batches are being written now
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        time.sleep(0.5)  # changes the dead worker never saw
        second = _run_worker(database, redis_url, "--identity", "second", kubeconfig=kubeconfig)
        try:
            time.sleep(1.0)
            stop.set()
            churner.join(timeout=10)
            # The dead worker's locks expire after their ttl; then the new one lists and catches up.
            _wait_converged(server, database, timeout=LOCK_TTL + 30)
            assert all(_owner(redis_url, kind).startswith("second:") for kind in KINDS)
        finally:
            second.terminate()
            second.wait(timeout=20)
    finally:
        stop.set()
        if first.poll() is None:
            first.kill()


def test_two_workers_one_watcher_per_kind_and_takeover_within_the_lock_ttl(
    server, tmp_path, database, redis_url
):
    """Both workers start; one holds each kind. Killing it hands the kind to the other once the
    dead holder's lock runs out its ttl (2 s here; 30 s by default), and nothing is lost."""
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    _populate(server, count=5)
    workers = {
        name: _run_worker(database, redis_url, "--identity", name, kubeconfig=kubeconfig)
        for name in ("alpha", "beta")
    }
    try:
        _wait_converged(server, database, timeout=60)
        owners = {kind: _owner(redis_url, kind) for kind in KINDS}
        holders = {owner.split(":")[0] for owner in owners.values()}
        assert holders <= {"alpha", "beta"} and all(owners.values())
        # Only the holder watches: for a while the lock keeps its owner (renewed, not taken over).
        for _ in range(10):
            time.sleep(0.2)
            assert {kind: _owner(redis_url, kind) for kind in KINDS} == owners
        victim = _owner(redis_url, "Node").split(":")[0]
        survivor = "beta" if victim == "alpha" else "alpha"
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait(timeout=10)
        # Nobody renews the dead worker's lock: Redis drops it within its ttl, never later.
        left = redis.Redis.from_url(redis_url).pttl(LOCK_PREFIX + "Node")
        assert left == -2 or 0 < left <= LOCK_TTL * 1000
        server.apply(objects.node("after-the-kill"))
        server.apply(objects.resource_claim("team-a", "after-the-kill"))
        deadline = time.monotonic() + 60
        while not all(_owner(redis_url, k).startswith(survivor + ":") for k in KINDS):
            assert time.monotonic() < deadline, "the survivor never took over"
            time.sleep(0.05)
        _wait_converged(server, database, timeout=30)
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=20)


def _pg_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert found, "PostgreSQL is not installed (bin/system-deps installs it)"
    return found[-1].parent


def _as_postgres(*command: str) -> list[str]:
    # initdb and postgres refuse to run as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


class PrivatePostgres:
    """A PostgreSQL server of this test's own, which the test may stop and start."""

    def __init__(self) -> None:
        from tests.paths import free_port

        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="dra-pg-", dir="/tmp"))
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres")
        subprocess.run(
            _as_postgres(
                str(_pg_bin() / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        subprocess.run(
            _as_postgres(
                str(_pg_bin() / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.data / "server.log"),
                "-w",
                "-o",
                f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        subprocess.run(
            _as_postgres(
                str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"
            ),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stored(self, kind: str) -> dict[str, str]:
        import psycopg

        table = handler_for(kind).model._meta.db_table
        with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as connection:
            return dict(connection.execute(f"SELECT uid, resource_version FROM {table}"))  # noqa: S608


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


def test_database_down_30_s_during_churn_converges(server, tmp_path, private_postgres, redis_url):
    """PostgreSQL stopped for 30 s while objects keep changing, then started: the worker that
    kept running (its batches failing meanwhile) converges, nothing lost."""
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    env_database = private_postgres.url
    migrate = _run_worker_url(env_database, redis_url, "--migrate")
    assert migrate.wait(timeout=300) == 0
    _populate(server, count=10)
    worker = _run_worker_url(env_database, redis_url, "--identity", "steady", kubeconfig=kubeconfig)
    stop = threading.Event()
    churner = threading.Thread(target=scope.carried(_churn), args=(server, stop), daemon=True)
    try:
        _wait_until_equal(server, private_postgres.stored, timeout=60)
        churner.start()
        time.sleep(0.5)
        private_postgres.stop()
        time.sleep(30)
        private_postgres.start()
        time.sleep(1.0)
        stop.set()
        churner.join(timeout=10)
        assert worker.poll() is None, "the worker died while the database was down"
        _wait_until_equal(server, private_postgres.stored, timeout=60)
    finally:
        stop.set()
        worker.terminate()
        worker.wait(timeout=20)


def _run_worker_url(
    url: str, redis_url: str, *args: str, kubeconfig: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DASHBOARD_DATABASE_URL": url,
        "DASHBOARD_REDIS_URL": redis_url,
        "DASHBOARD_EMBEDDED_SYNC": "0",
    }
    command = [sys.executable, "-m", "tests.inventory.sync.worker", *args]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig), "--lock-ttl", str(LOCK_TTL)]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wait_until_equal(server: FakeApiServer, stored, *, timeout: float) -> None:
    started = time.monotonic()
    while True:
        try:
            differing = [k for k in KINDS if stored(k) != server_state(server, k)]
        except Exception as exc:  # the database not answering yet
            differing = [repr(exc)]
        if not differing:
            return
        assert time.monotonic() - started < timeout, f"{differing} differ from the server"
        time.sleep(0.2)
