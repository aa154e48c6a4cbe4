"""Benchmark: what-if through the HTTP API of a real server process, with the goals of issue 25.

Run: .venv/bin/python tests/benchmarks/bench_whatif_http.py [--nodes 1000] [--runs 5]
Loads the demo cluster into a fresh database (a SQLite file, or a fresh PostgreSQL database
when DASHBOARD_DATABASE_URL names one), starts the server on it as `bin/run` does (no sync),
and times `POST /api/claims/what-if/` from this process over loopback:

* cold: the first question a fresh server process answers (one per server, `--runs` servers),
  asked once the server's start-up work is done (its CPU printed apart);
* a new question on a warm server (a claim name not asked before: no result cache);
* the same question again (answered from the result cache);
* the same question right after a cluster change (one ResourceSlice or one allocated claim
  written again through the sync's own write path, as a watcher does);
* headroom (`count: max`) for a 2-GPU claim not asked before;
* the server's peak RSS after all of it;
* the same question asked at once by 1, 4 and 8 clients (threads), each level on a fresh
  server: every answer must be complete (no `gaveUp`) and the same apart from
  `elapsedSeconds` and `cached` (the acceptance of issue 25). A level's CPU is the server's
  CPU for all its answers divided by the clients.

Each figure is the median of `--runs` requests: the server's CPU time (utime + stime from
/proc, judged against the goal) beside the wall time to the answer's last byte (curl's
time_total), with the load average.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _measure import (
    RUNS,
    Sample,
    Server,
    load_average,
    memory_line,
    process_cpu,
    report,
    settle,
)
from _server import load_demo, setup_shared_database, start_server

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: team-a}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu.example.com, count: 2}}
"""

# Goals of issue 25 at 5,000 nodes, judged on the server's CPU time of the request.
GOALS_MS = {
    "after-change": 100.0,
    "new": 250.0,
    "cached": 30.0,
    "cold": 2000.0,
    "headroom": 1000.0,
}
RSS_GOAL_MB = 800.0


def _post(server: Server, body: dict) -> tuple[Sample, dict]:
    sample = server.request(
        "/api/claims/what-if/",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    return sample, json.loads(sample.body)


def _changes(by_kind: dict) -> list[tuple[str, dict]]:
    """Objects to write again, one per change: a ResourceSlice, then allocated claims."""
    claims = by_kind["ResourceClaim"]
    slices = by_kind["ResourceSlice"]
    return [
        ("ResourceSlice", copy.deepcopy(slices[len(slices) // 2])),
        *(("ResourceClaim", copy.deepcopy(claims[(len(claims) * i) // 17])) for i in range(1, 16)),
    ]


def _change(to_change: list[tuple[str, dict]], index: int) -> None:
    """Write one object again through the sync's own write path, as a watcher does."""
    from django.db import connection

    from inventory.sync import upsert_events

    kind, changed = to_change[index % len(to_change)]
    meta = changed["metadata"]
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1_000_000)
    meta.setdefault("labels", {})["bench/changed"] = str(index)
    if kind == "ResourceClaim":
        # The claim's pod finished: its devices are free again.
        changed["status"] = {}
    upsert_events(kind, [(changed, None)], publish=False)
    connection.close()


def _question(name: str) -> dict:
    return {"yaml": CLAIM.format(name=name)}


# Clients asking the same question at once, each level on a fresh server.
CONCURRENCY = (1, 4, 8)


def _comparable(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k not in ("elapsedSeconds", "cached")}


def _concurrent(url: str, headers: dict[str, str]) -> None:
    """The same question from 1, 4 and 8 clients at once on a fresh server: the median wall
    time, the server CPU per answer, and every answer complete and the same."""
    print("the same question from several clients at once, each level on a fresh server:")
    seen: dict | None = None
    for clients in CONCURRENCY:
        process, base = start_server(url)
        try:
            settle(process.pid)
            server = Server(process.pid, base, headers)
            before = process_cpu(process.pid)
            with ThreadPoolExecutor(max_workers=clients) as pool:
                asks = [
                    pool.submit(_post, server, _question("bench-together")) for _ in range(clients)
                ]
                results = [ask.result() for ask in asks]
            cpu = (process_cpu(process.pid) - before) / clients
        finally:
            process.terminate()
            process.wait(timeout=30)
        walls = [sample.wall for sample, _ in results]
        cached = sum(1 for _, answer in results if answer.get("cached"))
        print(
            f"  {clients} client(s): server CPU {cpu * 1000:.0f} ms per answer, wall median "
            f"{statistics.median(walls) * 1000:.0f} ms [{min(walls) * 1000:.0f}-"
            f"{max(walls) * 1000:.0f}], {cached} of {clients} from the cache",
            flush=True,
        )
        for sample, answer in results:
            assert sample.status == 200, sample.body[:300]
            assert "gaveUp" not in answer, answer["gaveUp"]
            if seen is None:
                seen = _comparable(answer)
            assert _comparable(answer) == seen, "every client must get the same answer"
    print("  every answer complete and the same at every level", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=RUNS, help="requests per figure (≥ 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = setup_shared_database(Path(tmp))
        from django.contrib.auth import get_user_model
        from django.db import connection
        from rest_framework.authtoken.models import Token

        started = time.perf_counter()
        by_kind = load_demo(args.nodes, seed=args.seed)
        user = get_user_model().objects.create_user("bench", password=None)
        headers = {"Authorization": f"Token {Token.objects.create(user=user).key}"}
        to_change = _changes(by_kind)
        del by_kind
        print(f"database: {connection.vendor}, on disk")
        print(f"loaded the {args.nodes}-node demo cluster in {time.perf_counter() - started:.1f} s")
        connection.close()

        # Cold: the first question of a fresh server, once per server, `runs` servers, asked
        # once the server's start-up work (the class membership it computes in the background)
        # is done, so that its CPU is not counted in the question's; it is printed apart.
        colds = []
        startups = []
        for run in range(args.runs):
            process, base = start_server(url)
            try:
                startups.append(settle(process.pid))
                sample, answer = _post(Server(process.pid, base, headers), _question(f"cold-{run}"))
                colds.append(sample)
            finally:
                process.terminate()
                process.wait(timeout=30)
        summary = answer["summary"]
        print(f"what-if, {args.nodes} nodes ({load_average()}):")
        print(
            f"  server start-up until idle: CPU {statistics.median(startups):.2f} s "
            f"(median of {len(startups)})"
        )
        report(
            f"cold: the first question of a fresh server ({summary['nodesChecked']} nodes, "
            f"{summary['nodesFit']} fit)",
            colds,
            goal_ms=GOALS_MS["cold"],
        )

        process, base = start_server(url)
        # The process's CPU is every thread's: its start-up work (seconds of CPU in the
        # background) must be over before the figures below, or it is charged to them; the
        # first request after start is the cold figure above.
        settle(process.pid)
        server = Server(process.pid, base, headers)
        try:
            _post(server, _question("bench-two-gpus"))
            report(
                "a question not asked before",
                [_post(server, _question(f"bench-new-{i}"))[0] for i in range(args.runs)],
                goal_ms=GOALS_MS["new"],
            )
            cached = []
            for _ in range(args.runs):
                sample, answer = _post(server, _question("bench-two-gpus"))
                assert answer["cached"] is True, "the same question again must be cached"
                cached.append(sample)
            report("the same question again (cached)", cached, goal_ms=GOALS_MS["cached"])
            after = []
            for index in range(max(args.runs, 7)):
                _change(to_change, index)
                sample, answer = _post(server, _question("bench-two-gpus"))
                assert answer["cached"] is False, (
                    "a changed cluster must not be answered from cache"
                )
                after.append(sample)
            report(
                "right after a cluster change (a slice or a claim written again)",
                after,
                goal_ms=GOALS_MS["after-change"],
            )
            headroom = []
            for index in range(args.runs):
                sample, full = _post(
                    server, {**_question(f"bench-headroom-{index}"), "count": "max"}
                )
                headroom.append(sample)
            report(
                f"headroom count=max ({full['headroom']['placed']} copies on "
                f"{full['headroom']['placementsTotal']} nodes)",
                headroom,
                goal_ms=GOALS_MS["headroom"],
            )
            print(memory_line(process.pid, goal_mb=RSS_GOAL_MB))
        finally:
            process.terminate()
            process.wait(timeout=30)
        _concurrent(url, headers)


if __name__ == "__main__":
    main()
