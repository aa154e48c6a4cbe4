"""Benchmark: every page, pool-status and /metrics through HTTP on a fresh server, as users meet
them.

Run: .venv/bin/python tests/benchmarks/bench_pages.py [--nodes 1000] [--runs 5] [--keep DIR]
Loads the demo cluster into an on-disk database (a SQLite file, or a fresh PostgreSQL database
when DASHBOARD_DATABASE_URL names one), starts the server on it as `bin/run` does (uvicorn via
`console.serve`, no sync) and asks over loopback, signed in by a session cookie:

* the server's start-up work: CPU until it goes idle (it computes the class membership and
  physical units in the background), judged against the cold goal;
* the first `/` after that, the first request of every other page, then the median of
  `--runs` requests of each;
* on a second fresh server, the first `/metrics` scrape right after /healthz answers (start-up
  work still running, as an early scrape meets it), then the median of a few (and its size),
  then the median of a few once the start-up work is done (every series: those during the
  warm-up leave out the class series);
* the server's peak RSS after all of it.

Each figure prints the server's CPU time (judged against the goal: ≤ 300 ms for every page and
a scrape, ≤ 1 MB a scrape, ≤ 800 MB server RSS) beside the wall time. `--keep DIR` keeps the
SQLite file in DIR and reuses it when it already holds the cluster (loading takes minutes at
5,000 nodes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _measure import (
    RUNS,
    Sample,
    Server,
    load_average,
    memory_line,
    report,
    session_cookie,
    settle,
)
from _server import load_demo, setup_shared_database, start_server

PAGE_GOAL_MS = 300.0
METRICS_BYTES_GOAL = 1_000_000
RSS_GOAL_MB = 800.0
# The cold goal (the first what-if after start), for the server's own start-up work.
STARTUP_GOAL_S = 2.0


def _pages() -> list[str]:
    """The pages to time, with real names of the loaded cluster in their URLs."""
    from claims.models import ResourceClaim
    from inventory.models import Device, Node, Pool

    pool = Pool.objects.order_by("-device_count").first()
    claim = ResourceClaim.objects.filter(state="reserved").first()
    node = Node.objects.order_by("name").first()
    device = Device.objects.filter(pool=pool).order_by("name").first()
    assert pool and claim and node and device, "the demo cluster did not load"
    return [
        "/",
        "/leaks/",
        "/api/inventory/pool-status/?limit=1000",
        "/api/inventory/availability/",
        "/pools/",
        "/pools/?page=5",
        "/nodes/",
        "/nodes/?page=10",
        "/devices/",
        "/claims/",
        "/claims/?state=pending",
        "/templates/",
        "/quotas/",
        "/sync/",
        "/what-if/",
        f"/pools/{pool.driver}/{pool.name}/",
        f"/devices/{device.driver}/{device.pool_name}/{device.name}/",
        f"/nodes/{node.name}/",
        f"/claims/{claim.namespace}/{claim.name}/",
    ]


def _load(nodes: int, seed: int) -> None:
    from claims.devices.history import take_sample
    from claims.models import ResourceClaim
    from inventory.models import Device, Node

    started = time.perf_counter()
    if Node.objects.exists():
        print(f"reusing the loaded database: {Node.objects.count()} nodes")
    else:
        load_demo(nodes, seed=seed)
        take_sample()
        print(f"loaded the {nodes}-node demo cluster in {time.perf_counter() - started:.0f} s")
    print(f"{Device.objects.count()} devices, {ResourceClaim.objects.count()} claims")


def _measure(url: str, cookie: str, runs: int) -> None:
    from django.db import connection

    from claims.models import KeptMembership

    pages = _pages()
    # A database that a server ran on keeps the class membership's CEL outcomes: a restart
    # evaluates none again (`--keep`); the first start on a new one evaluates every device.
    restart = KeptMembership.objects.exists()
    connection.close()
    process, base = start_server(url)
    server = Server(process.pid, base, {"Cookie": cookie})
    try:
        print(f"pages, fresh server ({load_average()}):")
        report_startup(process.pid, restart=restart)
        first: dict[str, Sample] = {}
        for path in pages:
            first[path] = server.request(path)
            assert first[path].status == 200, path
            label = "first / after start" if path == "/" else f"first {path}"
            report(label, [first[path]], goal_ms=PAGE_GOAL_MS)
        print(f"pages, later requests ({load_average()}):")
        for path in pages:
            report(path, [server.request(path) for _ in range(runs)], goal_ms=PAGE_GOAL_MS)
        print(memory_line(process.pid, goal_mb=RSS_GOAL_MB))
    finally:
        process.terminate()
        process.wait(timeout=30)

    process, base = start_server(url)
    server = Server(process.pid, base, {"Cookie": cookie})
    try:
        print(f"/metrics, fresh server, scraped at once ({load_average()}):")
        report(
            "first /metrics right after /healthz answered (start-up work still running)",
            [server.request("/metrics")],
            goal_ms=PAGE_GOAL_MS,
            size_goal=METRICS_BYTES_GOAL,
        )
        report(
            "/metrics",
            [server.request("/metrics") for _ in range(runs)],
            goal_ms=PAGE_GOAL_MS,
            size_goal=METRICS_BYTES_GOAL,
        )
        # Scrapes during the warm-up leave out the class series (dra_dashboard_warming 1):
        # the full scrape, once the start-up work is done, is the one Prometheus meets after.
        settle(process.pid)
        report(
            "/metrics after the start-up work (every series)",
            [server.request("/metrics") for _ in range(runs)],
            goal_ms=PAGE_GOAL_MS,
            size_goal=METRICS_BYTES_GOAL,
        )
        print(memory_line(process.pid, goal_mb=RSS_GOAL_MB))
    finally:
        process.terminate()
        process.wait(timeout=30)


def report_startup(pid: int, *, restart: bool) -> None:
    """The server's start-up work (imports, and the class membership and units it computes in
    the background), waited for before the first page: its CPU, judged as a cold start."""
    cpu = settle(pid)
    verdict = "met" if cpu <= STARTUP_GOAL_S else "MISSED"
    which = "a restart" if restart else "the first start on this database"
    print(
        f"  start-up until idle ({which}): server CPU {cpu:.2f} s; "
        f"goal ≤ {STARTUP_GOAL_S:g} s: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the SQLite file here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        if args.keep:
            where = args.keep / f"pages-{args.nodes}-{args.seed}"
            where.mkdir(parents=True, exist_ok=True)
        url = setup_shared_database(where)
        from django.db import connection

        print(f"database: {connection.vendor}, on disk")
        _load(args.nodes, args.seed)
        _measure(url, session_cookie(), args.runs)


if __name__ == "__main__":
    main()
