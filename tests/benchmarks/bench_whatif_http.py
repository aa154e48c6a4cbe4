"""Benchmark: what-if through the HTTP API of a real server process, with the goals of issue 12.

Run: .venv/bin/python tests/benchmarks/bench_whatif_http.py [--nodes 1000] [--runs 7]
Loads the demo cluster into a fresh database (a SQLite file, or a fresh PostgreSQL database
when DASHBOARD_DATABASE_URL names one), starts the server on it as `bin/run` does (no sync),
and times `POST /api/claims/what-if/` from this process over loopback:

* cold: the first question a fresh server process answers (database read, CEL compiled);
* a new question on a warm server (a claim name not asked before: no result cache);
* the same question right after a cluster change (one ResourceSlice and one allocated claim
  written again through the sync's own write path, as a watcher does), median of several;
* headroom (`count: max`) for the same 2-GPU claim.

Prints each figure with its goal. Figures are wall time seen by the client, to the answer's last
byte (as curl's time_total).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from _django import peak_rss_mib
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

GOALS_MS = {"after-change": 100.0, "cold": 1000.0, "headroom": 500.0}


_server_pid = 0


def _server_cpu() -> float:
    """CPU seconds the server process used so far (utime + stime from /proc)."""
    fields = Path(f"/proc/{_server_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _post(base: str, token: str, body: dict) -> tuple[float, dict]:
    request = urllib.request.Request(
        f"{base}/api/claims/what-if/",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    cpu = _server_cpu()
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
    # Time to the last byte of the answer, as curl's time_total; parsing it is the client's.
    elapsed = time.perf_counter() - started
    _cpu_used.append(_server_cpu() - cpu)
    return elapsed, json.loads(body)


# Server CPU seconds of each request, in order (a loaded machine stretches wall time, not these).
_cpu_used: list[float] = []


def _line(label: str, seconds: float, goal: str, *, cpu: float) -> None:
    ms = seconds * 1000
    limit = GOALS_MS.get(goal)
    verdict = (
        "" if limit is None else f" (goal ≤ {limit:.0f} ms: {'met' if ms <= limit else 'MISSED'})"
    )
    print(f"{label}: {ms:.0f} ms{verdict}; server CPU {cpu * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = setup_shared_database(Path(tmp))
        from django.contrib.auth import get_user_model
        from django.db import connection
        from rest_framework.authtoken.models import Token

        from inventory.sync import upsert_events

        started = time.perf_counter()
        by_kind = load_demo(args.nodes, seed=args.seed)
        user = get_user_model().objects.create_user("bench", password=None)
        token = Token.objects.create(user=user).key
        claims = by_kind["ResourceClaim"]
        to_change = [
            (
                "ResourceSlice",
                copy.deepcopy(by_kind["ResourceSlice"][len(by_kind["ResourceSlice"]) // 2]),
            ),
            *(
                ("ResourceClaim", copy.deepcopy(claims[(len(claims) * i) // 17]))
                for i in range(1, 16)
            ),
        ]
        del by_kind, claims
        print(f"database: {connection.vendor}")
        print(f"loaded the {args.nodes}-node demo cluster in {time.perf_counter() - started:.1f} s")
        connection.close()

        server, base = start_server(url)
        global _server_pid
        _server_pid = server.pid
        try:
            body = {"yaml": CLAIM.format(name="bench-two-gpus")}
            cold, answer = _post(base, token, body)
            summary = answer["summary"]
            _line(
                f"what-if cold (fresh server, {summary['nodesChecked']} nodes, "
                f"{summary['nodesFit']} fit)",
                cold,
                "cold",
                cpu=_cpu_used[-1],
            )
            fresh = [
                _post(base, token, {"yaml": CLAIM.format(name=f"bench-new-{i}")})[0]
                for i in range(args.runs)
            ]
            _line(
                "what-if, a question not asked before (median)",
                statistics.median(fresh),
                "",
                cpu=statistics.median(_cpu_used[-len(fresh) :]),
            )
            cached, _ = _post(base, token, body)
            _line("what-if answered from the result cache", cached, "", cpu=_cpu_used[-1])
            after = []
            for index in range(args.runs):
                kind, changed = to_change[index % len(to_change)]
                meta = changed["metadata"]
                meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1_000_000)
                meta.setdefault("labels", {})["bench/changed"] = str(index)
                if kind == "ResourceClaim":
                    # The claim's pod finished: its devices are free again.
                    changed["status"] = {}
                upsert_events(kind, [(changed, None)], publish=False)
                connection.close()
                seconds, answer = _post(base, token, body)
                assert answer["cached"] is False, (
                    "a changed cluster must not be answered from cache"
                )
                after.append(seconds)
            _line(
                f"what-if right after a cluster change (median of {len(after)}, max "
                f"{max(after) * 1000:.0f} ms)",
                statistics.median(after),
                "after-change",
                cpu=statistics.median(_cpu_used[-len(after) :]),
            )
            headroom_seconds, full = _post(base, token, {**body, "count": "max"})
            _line(
                f"headroom count=max: {full['headroom']['placed']} copies on "
                f"{len(full['headroom']['placements'])} nodes",
                headroom_seconds,
                "headroom",
                cpu=_cpu_used[-1],
            )
            print(
                f"server peak RSS: {_server_rss_mib(server.pid):.0f} MiB; "
                f"this process: {peak_rss_mib():.0f} MiB"
            )
        finally:
            server.terminate()
            server.wait(timeout=30)


def _server_rss_mib(pid: int) -> float:
    # VmHWM is the process's peak resident set, in kB.
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


if __name__ == "__main__":
    main()
