"""Celery workers adopt the watchers themselves: no beat anywhere in these tests.

Each test runs real `celery worker` processes (the threads pool, as deploy/entrypoint.sh starts
them) with a throwaway Redis as broker and lease store, a SQLite file as database and the fake API
server over HTTP as the cluster. Each test runs on a SQLite file and on a PostgreSQL server of
its own; the database and Redis are read from outside the workers.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard import scope
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.leases import QUEUED_SUFFIX, lease_name
from inventory.locks import LOCK_PREFIX
from inventory.models import SyncState
from inventory.sync import handler_for
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import server_state
from tests.inventory.sync.test_workers import PrivatePostgres
from tests.paths import ROOT

# Each test starts its own Redis and worker processes: run once (bin/test).
pytestmark = pytest.mark.once

# Short, so takeovers come fast; 3 s leaves a loaded machine 2 s to renew a lease every 1 s.
LEASE_SECONDS = 3
COMPARED = ("Node", "ResourceClaim", "DeviceClass", "ResourceSlice")
# What a worker's log must never say: a second writer of the same rows, or any failure.
TROUBLE = re.compile(r"IntegrityError|UNIQUE constraint|duplicate key|Traceback|ERROR")


class Worker:
    """A `celery -A dashboard worker` process logging to a file of its own."""

    def __init__(
        self, name: str, *, env: dict[str, str], log_dir: Path, queues: str = "celery,watchers"
    ) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "dashboard",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "24",
            "--queues",
            queues,
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def cluster(server: FakeApiServer) -> FakeApiServer:
    """The fake API server with a few objects of the compared kinds."""
    server.apply(objects.device_class("gpu"))
    for i in range(5):
        server.apply(objects.node(f"node-{i}"))
        server.apply(objects.resource_slice(f"slice-{i}", node_name=f"node-{i}"))
        server.apply(objects.resource_claim("team-a", f"claim-{i}"))
    return server


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a PostgreSQL server of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'adoption.sqlite3'}"
        return
    postgres = PrivatePostgres()
    postgres.start()
    try:
        yield postgres.url
    finally:
        postgres.stop()
        shutil.rmtree(postgres.dir, ignore_errors=True)


@pytest.fixture
def worker_env(
    cluster: FakeApiServer, tmp_path: Path, redis_url: str, database_url: str
) -> dict[str, str]:
    """The environment of every worker: one database, one Redis, the fake cluster."""
    env = {
        **os.environ,
        "DASHBOARD_DATABASE_URL": database_url,
        "DASHBOARD_REDIS_URL": redis_url,
        "DASHBOARD_CELERY_EAGER": "0",
        "DASHBOARD_EMBEDDED_SYNC": "0",
        "DASHBOARD_KUBECONFIG": str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
        "DASHBOARD_WATCH_LEASE_SECONDS": str(LEASE_SECONDS),
        "DASHBOARD_LOG_JSON": "0",
    }
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert migrate.returncode == 0, migrate.stderr.decode()
    return env


@pytest.fixture
def workers(worker_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, Worker]]:
    """Started workers by name; each is stopped (or was killed) at the end."""
    started: dict[str, Worker] = {}
    yield started
    for worker in started.values():
        worker.stop()


def _start(workers: dict[str, Worker], env: dict[str, str], log_dir: Path, *names: str) -> None:
    for name in names:
        workers[name] = Worker(name, env=env, log_dir=log_dir)


def _database(env: dict[str, str]) -> str:
    return env["DASHBOARD_DATABASE_URL"]


def _rows(database: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of `query`, read with the backend's plain driver from outside the workers."""
    if database.startswith("sqlite:///"):
        with sqlite3.connect(database.removeprefix("sqlite:///"), timeout=30) as connection:
            return list(connection.execute(query))
    import psycopg

    with psycopg.connect(database.replace("postgres://", "postgresql://", 1)) as connection:
        return list(connection.execute(query))


def _stored(database: str, kind: str) -> dict[str, str]:
    table = handler_for(kind).model._meta.db_table
    return dict(_rows(database, f"SELECT uid, resource_version FROM {table}"))  # noqa: S608


def _synced_kinds(database: str) -> set[str]:
    """Kinds whose watcher has listed, or found the kind not served by the cluster."""
    table = SyncState._meta.db_table
    query = f"SELECT kind FROM {table} WHERE last_list_at IS NOT NULL OR NOT served"  # noqa: S608
    return {row[0] for row in _rows(database, query)}


def _holders(redis_url: str) -> dict[str, str]:
    """lease -> the owner written in it, for every held watch lease."""
    client = redis.Redis.from_url(redis_url)
    held = {}
    for kind in KINDS:
        value = client.get(LOCK_PREFIX + lease_name(kind))
        if value:
            held[kind] = value.decode()
    return held


def _pid_of(owner: str) -> int:
    # Watcher owners are host:pid:kind:random (inventory.sync.watch.runner.default_identity).
    return int(owner.split(":")[1])


def _converged(server: FakeApiServer, database: str) -> list[str]:
    """What still differs between the server and the database (empty once converged)."""
    differing = sorted(set(KINDS) - _synced_kinds(database))
    differing += [k for k in COMPARED if _stored(database, k) != server_state(server, k)]
    return differing


def _wait_converged(server: FakeApiServer, database: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    differing = _converged(server, database)
    while differing:
        assert time.monotonic() < deadline, f"never converged: {differing} differ"
        time.sleep(0.2)
        differing = _converged(server, database)


def _wait_held_by(redis_url: str, pids: set[int], *, timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        held = _holders(redis_url)
        if set(held) == set(KINDS) and {_pid_of(owner) for owner in held.values()} <= pids:
            return held
        assert time.monotonic() < deadline, f"leases not all held by {pids}: {held}"
        time.sleep(0.05)


def _assert_clean_logs(*workers: Worker) -> None:
    for worker in workers:
        trouble = [line for line in worker.text().splitlines() if TROUBLE.search(line)]
        assert trouble == [], f"{worker.name}: {trouble[:5]}"


def test_one_worker_alone_fills_the_database_without_beat(cluster, worker_env, workers, tmp_path):
    """A single worker and no beat: the worker adopts every lease itself and every kind syncs."""
    _start(workers, worker_env, tmp_path, "alone")
    _wait_converged(cluster, _database(worker_env), timeout=120)
    held = _wait_held_by(worker_env["DASHBOARD_REDIS_URL"], {workers["alone"].pid}, timeout=30)
    assert set(held) == set(KINDS)
    assert "adopted free watch leases" in workers["alone"].text()
    _assert_clean_logs(workers["alone"])


def test_a_killed_workers_leases_are_taken_over_without_beat(
    cluster, worker_env, workers, tmp_path
):
    """Two workers; the one holding every lease is killed with -9. Its leases expire within the
    lease time, the other worker adopts them on its own and a change made after the kill reaches
    the database."""
    redis_url = worker_env["DASHBOARD_REDIS_URL"]
    database = _database(worker_env)
    _start(workers, worker_env, tmp_path, "first")
    _wait_converged(cluster, database, timeout=120)
    _wait_held_by(redis_url, {workers["first"].pid}, timeout=30)
    _start(workers, worker_env, tmp_path, "second")
    # The second worker is up (it said so) and finds nothing free: the first keeps every lease.
    deadline = time.monotonic() + 60
    while "ready." not in workers["second"].text():
        assert time.monotonic() < deadline, "the second worker never became ready"
        time.sleep(0.1)
    assert {_pid_of(o) for o in _holders(redis_url).values()} == {workers["first"].pid}

    workers["first"].kill()
    # Nobody renews the dead worker's leases: Redis drops each within the lease, never later.
    client = redis.Redis.from_url(redis_url)
    left = [client.pttl(LOCK_PREFIX + lease_name(kind)) for kind in KINDS]
    assert all(ms == -2 or 0 < ms <= LEASE_SECONDS * 1000 for ms in left), left
    cluster.apply(objects.node("after-the-kill"))
    cluster.apply(objects.resource_claim("team-a", "after-the-kill"))
    cluster.delete("nodes", name="node-0")

    _wait_held_by(redis_url, {workers["second"].pid}, timeout=60)
    _wait_converged(cluster, database, timeout=60)
    nodes = handler_for("Node").model._meta.db_table
    names = {row[0] for row in _rows(database, f"SELECT name FROM {nodes}")}  # noqa: S608
    assert "after-the-kill" in names and "node-0" not in names
    _assert_clean_logs(workers["second"])


def test_three_workers_started_together_watch_each_kind_once(
    cluster, worker_env, workers, tmp_path
):
    """Three workers start at once: every lease has one holder that keeps it (renewed, never
    taken over) and each kind's watcher starts once across the workers. (The markers that keep
    racing workers from queueing a kind twice are raced deterministically in test_leases.py.)"""
    redis_url = worker_env["DASHBOARD_REDIS_URL"]
    _start(workers, worker_env, tmp_path, "one", "two", "three")
    _wait_converged(cluster, _database(worker_env), timeout=120)
    pids = {worker.pid for worker in workers.values()}
    held = _wait_held_by(redis_url, pids, timeout=30)

    changes: list[tuple[str, str, str]] = []
    stop = threading.Event()

    def watch_holders() -> None:
        seen = dict(held)
        while not stop.is_set():
            for kind, owner in _holders(redis_url).items():
                if seen.get(kind) != owner:
                    changes.append((kind, seen.get(kind, ""), owner))
                    seen[kind] = owner
            time.sleep(0.02)

    sampler = threading.Thread(target=scope.carried(watch_holders), daemon=True)
    sampler.start()
    # Three lease times: every holder renews about nine times and every supervisor checks six.
    stop.wait(3 * LEASE_SECONDS)
    stop.set()
    sampler.join(timeout=10)
    assert changes == []
    assert _holders(redis_url) == held

    logs = "\n".join(worker.text() for worker in workers.values())
    started = Counter(re.findall(r"(\w+): watching as ", logs))
    assert started == Counter(dict.fromkeys(KINDS, 1))
    _assert_clean_logs(*workers.values())


def test_watchers_stay_on_the_workers_consuming_the_watch_queue(
    cluster, worker_env, workers, tmp_path
):
    """A jobs-only worker (`--queues celery`) adopts no lease however long it runs alone; the
    worker started with the watch queue takes every kind."""
    redis_url = worker_env["DASHBOARD_REDIS_URL"]
    workers["jobs"] = Worker("jobs", env=worker_env, log_dir=tmp_path, queues="celery")
    deadline = time.monotonic() + 60
    while "ready." not in workers["jobs"].text():
        assert time.monotonic() < deadline, "the jobs worker never became ready"
        time.sleep(0.1)
    # Two lease times alone: a worker consuming the watch queue would have checked twice or more.
    time.sleep(2 * LEASE_SECONDS)
    client = redis.Redis.from_url(redis_url)
    # Nothing held, nothing queued: the broker's `watchers` list is empty and no marker was set.
    assert _holders(redis_url) == {}
    assert client.llen("watchers") == 0
    assert client.keys(LOCK_PREFIX + "*" + QUEUED_SUFFIX) == []
    _start(workers, worker_env, tmp_path, "watch")
    _wait_converged(cluster, _database(worker_env), timeout=120)
    _wait_held_by(redis_url, {workers["watch"].pid}, timeout=30)
    assert "watching as" not in workers["jobs"].text()
    _assert_clean_logs(*workers.values())
