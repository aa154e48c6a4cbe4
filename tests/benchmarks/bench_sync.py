"""Benchmark the live sync against the fake API server (a script, not a pytest test).

    eval "$(bin/services env)"   # PostgreSQL + Redis from `bin/services start`
    .venv/bin/python tests/benchmarks/bench_sync.py --nodes 1000

Figures printed: initial sync time and memory of a generated demo cluster (kind by kind for the
breakdown, and at the end all kinds at once, as the worker syncs them), ingest rate (events
per second applied to the database by running watchers), and the delay from a change at the API
server to its database commit (p50/p99, and apart: up to the batch's start, and the commit itself)
while watchers run (`--latency-only` skips ingest and the second sync). The fake API server
runs in its own process, as a real one does, so the figures (memory included) are the
dashboard's alone.
Ingest is the median of `--runs` runs (5) of the steady rate, from the moment every watch is
open (the rate from the watchers' start, start-up included, is printed beside it); every
figure is printed with the load averages and, for the 5,000-node demo, issue 25's goal and
verdict.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import sys
import threading
import time
import tracemalloc
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from dashboard import scope  # noqa: E402
from demo.server import load_demo  # noqa: E402
from dralib.kube.client import load_client  # noqa: E402
from dralib.kube.discovery import Discovery  # noqa: E402
from dralib.kube.fakeapi import ChurnLoop, FakeApiServer  # noqa: E402
from dralib.kube.kinds import KINDS  # noqa: E402
from inventory.clusters import cluster_id  # noqa: E402
from inventory.clusters import forget as forget_clusters  # noqa: E402
from inventory.models import SyncState  # noqa: E402
from inventory.sync import handler_for  # noqa: E402
from inventory.sync.watch import (  # noqa: E402
    DatabaseSink,
    KindWatcher,
    options_from_settings,
    run_kind,
)
from inventory.sync.watch import loop as watch_loop  # noqa: E402
from tests.benchmarks.sync_timeline import Timeline  # noqa: E402

# The benchmark's whole run (and its spawned processes') reads and writes the default cluster.
scope.enter_for_good(cluster_id)

# Issue 25's goals, for the 5,000-node demo on PostgreSQL.
GOAL_INITIAL_S = 30.0
GOAL_INGEST = 5000
GOAL_P99_MS = 250
# When the last ingest run's watchers started (perf_counter), for --timeline.
RUN_STARTED = [0.0]


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> str:
    """The machine's load averages (1, 5, 15 min): figures mean little without them."""
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def database_cpu() -> float | None:
    """CPU seconds the PostgreSQL server has used (its postmaster, the backends it reaped and
    those alive), read from /proc when it runs on this machine; None otherwise. Beside the
    dashboard's own CPU, the robust figure on a shared machine: wall time follows the load."""
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        postmaster = int(_proc_stat(backend)[1])
        fields = _proc_stat(postmaster)
        ticks = sum(int(value) for value in fields[11:15])
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                child = _proc_stat(int(entry.name))
            except OSError:
                continue
            if int(child[1]) == postmaster:
                ticks += int(child[11]) + int(child[12])
    except (OSError, ValueError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> list[str]:
    # The fields after the command name (which may hold spaces): state is [0], ppid [1].
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2 :].split()


def database_cpu_since(before: float | None) -> str:
    after = database_cpu()
    if before is None or after is None:
        return ""
    return f", PostgreSQL CPU {after - before:.1f}s"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def reset_database() -> None:
    # A throwaway database (test_<name>, created fresh), never the configured one.
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    forget_clusters()


def stored(kind: str) -> dict[str, str]:
    return dict(handler_for(kind).model.objects.values_list("uid", "resource_version"))


def expected(server: FakeApiServer, kind: str) -> dict[str, str]:
    # Every pod is stored (a slim projection for pods without claims), so every object counts.
    return {
        obj["metadata"]["uid"]: obj["metadata"]["resourceVersion"]
        for obj in server.objects(KINDS[kind].plural)
    }


class ApiServerProcess:
    """The fake API server with the demo cluster in a child process, driven over a pipe."""

    def __init__(self, *, nodes: int, seed: int, kubeconfig: Path) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child, nodes, seed, str(kubeconfig)), daemon=True
        )

    def __enter__(self) -> ApiServerProcess:
        self.process.start()
        self.counts, self.generated = self.pipe.recv()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.pipe.send(("stop", None))
        self.process.join(timeout=30)

    def call(self, command: str, argument: Any = None) -> Any:
        self.pipe.send((command, argument))
        return self.pipe.recv()


def _serve(pipe: Connection, nodes: int, seed: int, kubeconfig: str) -> None:
    with FakeApiServer(bookmark_interval=5.0, history_limit=200_000) as server:
        started = time.perf_counter()
        churn = load_demo(server, nodes=nodes, seed=seed)
        server.write_kubeconfig(Path(kubeconfig))
        counts = {p: len(server.objects(p)) for p in ("nodes", "resourceslices", "resourceclaims")}
        pipe.send((counts, time.perf_counter() - started))
        loop = ChurnLoop(server, churn, interval=1.0)
        while True:
            command, argument = pipe.recv()
            if command == "stop":
                return
            if command == "expected":
                pipe.send({kind: expected(server, kind) for kind in KINDS})
            elif command == "churn":
                before = int(server.resource_version)
                for _ in range(argument):
                    loop.run_once()
                pipe.send(int(server.resource_version) - before)
            elif command == "touch-nodes":
                pipe.send(_touch_nodes(server, *argument))


def _touch_nodes(server: FakeApiServer, changes: int, rate: float) -> dict[str, float]:
    """Relabel nodes at `rate` per second: the perf_counter time of each change by its RV
    (CLOCK_MONOTONIC, the same clock in both processes)."""
    sent: dict[str, float] = {}
    nodes = server.objects("nodes")
    for i in range(changes):
        node = nodes[i % len(nodes)]
        node["metadata"].setdefault("labels", {})["bench/tick"] = str(i)
        node["metadata"].pop("resourceVersion", None)
        t0 = time.perf_counter()
        stored_obj = server.apply(node)
        sent[stored_obj["metadata"]["resourceVersion"]] = t0
        time.sleep(1.0 / rate)
    return sent


def converged(server: ApiServerProcess) -> bool:
    wanted = server.call("expected")
    return all(stored(kind) == wanted[kind] for kind in KINDS)


def initial_sync(server: ApiServerProcess, kubeconfig: Path, *, trace: bool) -> None:
    options = options_from_settings()
    if trace:
        tracemalloc.start()
    rss_before = maxrss_mb()
    started = time.perf_counter()
    cpu = time.process_time()
    db_cpu = database_cpu()
    for kind, spec in KINDS.items():
        t0 = time.perf_counter()
        watcher = KindWatcher(
            spec,
            client_factory=lambda: load_client(kubeconfig=kubeconfig),
            sink=DatabaseSink(kind, watcher="bench"),
            stop=threading.Event(),
            options=options,
        )
        from inventory.sync.watch import state

        state.claim_kind(kind, watcher="bench")
        watcher.client = watcher.client_factory()
        from dralib.kube.discovery import discover

        served = discover(watcher.client, [spec])[kind]
        if served.version is None:
            print(f"  {kind:24s} not served")
            continue
        watcher.version = served.version
        # As the loop does before it lists: which cluster the objects come from.
        watcher.cluster_uid = watcher._cluster_identity()
        watcher.relist()
        count = handler_for(kind).model.objects.count()
        print(f"  {kind:24s} {count:6d} rows  {time.perf_counter() - t0:6.2f}s")
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    db = database_cpu_since(db_cpu)
    peak = ""
    if trace:
        _, peak_bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peak = f", tracemalloc peak {peak_bytes / 2**20:.0f} MiB"
    SyncState.objects.update(watcher="")
    print(
        f"initial sync, kind by kind: {elapsed:.1f}s (CPU {cpu:.1f}s{db}); "
        f"maxrss {rss_before:.0f} -> {maxrss_mb():.0f} MiB (the dashboard's process){peak}; "
        f"{load()}"
    )
    from inventory.models import Device

    print(f"  devices stored: {Device.objects.count()}")
    assert converged(server), "database differs from the server after the initial sync"


class Watchers:
    def __init__(self, kubeconfig: Path, *, list_on_start: bool = False) -> None:
        self.stop = threading.Event()
        # By default they resume from the cursors the initial sync stored (proven safe by the
        # cursor check), as a restarted worker does when its cursor is valid: this measures
        # watch ingest, not a relist.
        options = options_from_settings(heartbeat_every=2.0, list_on_start=list_on_start)
        # One discovery for the cluster's watchers, as start_watchers gives them.
        discovery = Discovery()
        self.threads = [
            threading.Thread(
                target=run_kind,
                kwargs={
                    "kind": kind,
                    "stop": self.stop,
                    "options": options,
                    "client_factory": lambda: load_client(kubeconfig=kubeconfig),
                    "lock_retry": 0.2,
                    "discovery": discovery,
                },
                daemon=True,
            )
            for kind in KINDS
        ]

    def __enter__(self) -> Watchers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def initial_sync_together(kubeconfig: Path) -> None:
    """The initial sync as the worker runs it: every kind's watcher starts at once on an empty
    database and syncs its state (a watch list where served), timed until all have stored it.
    In a process of its own, so that its memory is its own."""
    call_command("flush", interactive=False, verbosity=0)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_sync_together, args=(child, connection.settings_dict["NAME"], str(kubeconfig))
    )
    db_cpu = database_cpu()
    process.start()
    elapsed, rss, cpu = parent.recv()
    db = database_cpu_since(db_cpu)
    process.join(timeout=60)
    print(
        f"initial sync, all kinds at once (as the worker runs them): {elapsed:.1f}s "
        f"(CPU {cpu:.1f}s{db}); maxrss {rss:.0f} MiB (its own process); {load()} "
        f"(goal <= {GOAL_INITIAL_S:.0f} s at 5,000 nodes: {verdict(elapsed <= GOAL_INITIAL_S)})"
    )


def _sync_together(pipe: Connection, database: str, kubeconfig: str) -> None:
    connection.settings_dict["NAME"] = database
    started = time.perf_counter()
    cpu = time.process_time()
    with Watchers(Path(kubeconfig), list_on_start=True):
        deadline = time.monotonic() + 300
        while True:
            states = list(SyncState.objects.values_list("served", "last_list_at"))
            if len(states) == len(KINDS) and all(at or not on for on, at in states):
                break
            if time.monotonic() > deadline:
                raise SystemExit("initial sync (all kinds at once): not done after 300 s")
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
    pipe.send((elapsed, maxrss_mb(), time.process_time() - cpu))


def ingest(
    server: ApiServerProcess, kubeconfig: Path, *, steps: int, runs: int, timeline: str = ""
) -> None:
    """The median of `runs` ingest runs (`ingest_once`), each run printed (with `timeline`, a
    kind, where its watcher's batches spent their time)."""
    rates = []
    from_start = []
    for _ in range(runs):
        steps_of = Timeline(timeline) if timeline else None
        if steps_of is not None:
            steps_of.install()
        try:
            steady, whole = ingest_once(server, kubeconfig, steps=steps)
            rates.append(steady)
            from_start.append(whole)
        finally:
            if steps_of is not None:
                steps_of.uninstall()
                print(steps_of.report(RUN_STARTED[0]))
    rate = statistics.median(rates)
    print(
        f"ingest: median {rate:.0f} events/s of {runs} runs, steady "
        f"({', '.join(f'{r:.0f}' for r in rates)}); from the watchers' start: median "
        f"{statistics.median(from_start):.0f} ({', '.join(f'{r:.0f}' for r in from_start)}); "
        f"{load()} "
        f"(goal >= {GOAL_INGEST:,}/s: {verdict(rate >= GOAL_INGEST)})"
    )


def ingest_once(server: ApiServerProcess, kubeconfig: Path, *, steps: int) -> tuple[float, float]:
    """Steady ingest: events per second from the moment every served kind's watch is open to
    the commit that made the database equal to the server again, after a burst of churn.

    The rate from the watchers' start is printed beside it, with the start-up (client,
    discovery, cluster check, cursor proof) on its own: at 5,000 nodes a run's window is about
    two seconds, and a start-up of 0.1-1.0 s inside it made the spread between runs."""
    committed = [0]
    last_commit = [0.0]
    commits: list[tuple[float, int]] = []
    opened: dict[str, float] = {}
    original = watch_loop.KindWatcher.commit
    original_source = watch_loop.StreamSource

    def counting_commit(self: KindWatcher, batch: Any) -> None:
        original(self, batch)
        if batch.events:
            # Bookmark-only commits go on while the database is compared with the server
            # (seconds at 5,000 nodes): they are not ingest.
            committed[0] += len(batch.events)
            last_commit[0] = time.perf_counter()
            commits.append((last_commit[0], len(batch.events)))

    def opening_source(*args: Any, **kwargs: Any) -> Any:
        # Each watcher's first watch, by its thread: after it, the watcher only ingests.
        opened.setdefault(threading.current_thread().name, time.perf_counter())
        return original_source(*args, **kwargs)

    # The churn is generated first (the demo's allocator makes it slower than any ingest);
    # then watchers resume from their cursors and catch up, as after a worker restart.
    changes = server.call("churn", steps)
    watch_loop.KindWatcher.commit = counting_commit  # type: ignore[method-assign]
    watch_loop.StreamSource = opening_source  # type: ignore[misc]
    started = RUN_STARTED[0] = time.perf_counter()
    cpu = time.process_time()
    db_cpu = database_cpu()
    db = ""
    ingest_cpu: float | None = None
    with Watchers(kubeconfig):
        deadline = time.monotonic() + 300
        # Counting first, comparing after: the comparison would compete with the watchers.
        while True:
            if committed[0] >= changes and ingest_cpu is None:
                # The shares of ingest, before the comparison adds its reads (at 5,000 nodes it
                # reads ~110,000 rows: a third of the dashboard's CPU of a run).
                ingest_cpu = time.process_time() - cpu
                db = database_cpu_since(db_cpu)
            if committed[0] >= changes and converged(server):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"ingest: {committed[0]} of {changes} events after 300 s")
            time.sleep(0.01 if committed[0] < changes else 0.5)
        elapsed = last_commit[0] - started
        db = db or database_cpu_since(db_cpu)
        cpu = time.process_time() - cpu
    watch_loop.KindWatcher.commit = original  # type: ignore[method-assign]
    watch_loop.StreamSource = original_source  # type: ignore[misc]
    until_commit = f"{ingest_cpu:.2f}s to the last commit, " if ingest_cpu is not None else ""
    # Counted after the run: the kind-by-kind sync leaves the kinds it found not served marked
    # served until a watcher says otherwise (the first run's watchers do).
    served = SyncState.objects.filter(served=True).count()
    ready = max(opened.values()) if len(opened) >= served else started
    steady_events = sum(count for at, count in commits if at > ready)
    steady_s = last_commit[0] - ready
    steady = steady_events / steady_s if steady_s > 0 else 0.0
    print(
        f"  ingest run: {changes} changes from {steps} churn steps; steady {steady:.0f} events/s "
        f"({steady_events} committed in {steady_s:.2f}s after all {len(opened)} watches opened, "
        f"{ready - started:.2f}s after the start); from the watchers' start "
        f"{changes / elapsed:.0f} events/s ({elapsed:.2f}s); dashboard CPU {until_commit}"
        f"{cpu:.2f}s incl. the comparison{db}; {load()}"
    )
    return steady, changes / elapsed


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of `values` (nearest rank)."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latency(server: ApiServerProcess, kubeconfig: Path, *, changes: int, rate: float) -> None:
    """The delay from a node change at the server to its commit, split where the batch starts:
    before it, the server's watch, the stream and the batching; after it, the commit."""
    started: dict[str, float] = {}
    committed: dict[str, float] = {}
    original = watch_loop.KindWatcher.commit

    def timed_commit(self: KindWatcher, batch: Any) -> None:
        begun = time.perf_counter()
        original(self, batch)
        now = time.perf_counter()
        for _, obj in batch.events:
            version = str(obj["metadata"].get("resourceVersion"))
            started[version] = begun
            committed[version] = now

    watch_loop.KindWatcher.commit = timed_commit  # type: ignore[method-assign]
    with Watchers(kubeconfig):
        time.sleep(2.0)  # watchers resume and settle
        sent: dict[str, float] = server.call("touch-nodes", (changes, rate))
        deadline = time.monotonic() + 30
        while len(set(sent) & set(committed)) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
    watch_loop.KindWatcher.commit = original  # type: ignore[method-assign]
    done = [rv for rv in sent if rv in committed]
    delays = [(committed[rv] - sent[rv]) * 1000 for rv in done]
    p50, p99 = percentiles(delays)
    to_batch = percentiles([(started[rv] - sent[rv]) * 1000 for rv in done])
    commits = percentiles([(committed[rv] - started[rv]) * 1000 for rv in done])
    print(
        f"event -> commit latency ({len(delays)}/{len(sent)} node changes at {rate:.0f}/s): "
        f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(delays):.0f} ms; {load()} "
        f"(goal p99 <= {GOAL_P99_MS} ms: {verdict(p99 <= GOAL_P99_MS)})\n"
        f"  change -> batch start (server watch, stream, batching): p50 {to_batch[0]:.0f} ms, "
        f"p99 {to_batch[1]:.0f} ms; the commit itself: p50 {commits[0]:.0f} ms, "
        f"p99 {commits[1]:.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--churn-steps", type=int, default=400, help="per ingest run")
    parser.add_argument("--runs", type=int, default=5, help="ingest runs (median printed)")
    parser.add_argument("--latency-changes", type=int, default=300)
    parser.add_argument("--latency-rate", type=float, default=50.0)
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="after the initial sync (kind by kind) time change -> commit alone",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="sys.setswitchinterval for the run (seconds; default Python's 0.005)",
    )
    parser.add_argument(
        "--timeline", default="", metavar="KIND", help="time the steps of KIND's ingest batches"
    )
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations")
    parser.add_argument(
        "--allow-sqlite", action="store_true", help="run on the default SQLite file (wipes it)"
    )
    args = parser.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    if not settings.DATABASE_URL and not args.allow_sqlite:
        parser.error("set DASHBOARD_DATABASE_URL (a scratch database) or pass --allow-sqlite")
    print(
        f"database: {connection.vendor}; redis: {'yes' if settings.REDIS_URL else 'no'}; "
        f"{os.cpu_count()} CPUs; GIL switch interval {sys.getswitchinterval() * 1000:g} ms; "
        f"{load()}"
    )
    reset_database()
    # One file per run: another run on the machine (another engineer's, or bin/bench) writing
    # the same path pointed this run's watchers at its own server.
    kubeconfig = Path(settings.VAR_DIR) / f"bench-sync-{os.getpid()}.kubeconfig"
    try:
        with ApiServerProcess(nodes=args.nodes, seed=args.seed, kubeconfig=kubeconfig) as server:
            print(
                f"demo cluster: {server.counts} generated in {server.generated:.1f}s (own process)"
            )
            initial_sync(server, kubeconfig, trace=args.tracemalloc)
            if not args.latency_only:
                ingest(
                    server,
                    kubeconfig,
                    steps=args.churn_steps,
                    runs=args.runs,
                    timeline=args.timeline,
                )
            latency(server, kubeconfig, changes=args.latency_changes, rate=args.latency_rate)
            if not args.latency_only:
                initial_sync_together(kubeconfig)
            assert converged(server), "database differs from the server after the initial sync"
    finally:
        kubeconfig.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
