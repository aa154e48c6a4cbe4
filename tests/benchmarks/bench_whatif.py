"""Benchmark: what-if for one 2-GPU claim over the 1,000-node demo cluster, and headroom.

Run: .venv/bin/python tests/benchmarks/bench_whatif.py [--nodes 1000] [--runs 5]
Prints: the cold what-if (first read of the cluster, CEL compiled and evaluated), warm ones
(cluster state and selector results cached; result cache off) for new questions and for the
same question again (its per-node verdicts kept by the simulation that follows the cluster), a
cached answer, the cost of the
cluster fingerprint, a what-if right after a cluster change (one ResourceSlice and one claim
synced again with a new resourceVersion: only those rows are read and parsed again), and
headroom (copies of the claim placed one by one until the cluster is full). Set
DASHBOARD_DATABASE_URL to measure on PostgreSQL.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections import defaultdict

from _django import peak_rss_mib, setup_fresh_database

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bench-two-gpus, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, count: 2}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    database = setup_fresh_database()

    from claims.whatif.service import what_if
    from demo.generator import generate_demo_cluster
    from inventory.sync import HANDLERS, upsert_events

    started = time.perf_counter()
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for obj in generate_demo_cluster(nodes=args.nodes, seed=args.seed):
        by_kind[str(obj.get("kind"))].append(obj)
    order = ("DeviceClass", "Node", "ResourceSlice", "DeviceTaintRule")
    for kind in (*order, *sorted(set(by_kind) - set(order))):
        if kind in HANDLERS:
            upsert_events(kind, [(raw, None) for raw in by_kind[kind]], publish=False)
    print(f"database: {database}")
    print(f"loaded {args.nodes}-node demo cluster in {time.perf_counter() - started:.1f} s")
    # Objects to change later; the rest of the generated cluster goes, as in a web process that
    # did not load the database itself.
    to_change = {
        kind: copy.deepcopy(by_kind[kind][len(by_kind[kind]) // 2])
        for kind in ("ResourceSlice", "ResourceClaim")
    }
    del by_kind
    gc.collect()

    started = time.perf_counter()
    answer = what_if(CLAIM, use_cache=False)
    cold = time.perf_counter() - started
    summary = answer["summary"]
    print(
        f"what-if cold: {cold * 1000:.0f} ms ({summary['nodesChecked']} nodes, "
        f"{summary['nodesFit']} fit, first {summary['firstNode']})"
    )
    warm = []
    for run in range(args.runs):
        # A claim name not asked before: a new question, no per-node verdict kept for it.
        text = CLAIM.replace("bench-two-gpus", f"bench-new-{run}")
        started = time.perf_counter()
        what_if(text, use_cache=False)
        warm.append(time.perf_counter() - started)
    print(
        f"what-if warm, a new question: median {statistics.median(warm) * 1000:.0f} ms over "
        f"{args.runs} runs "
        f"({statistics.median(warm) / max(summary['nodesChecked'], 1) * 1e6:.0f} us per node)"
    )
    again = []
    for _ in range(args.runs):
        started = time.perf_counter()
        what_if(CLAIM, use_cache=False)
        again.append(time.perf_counter() - started)
    print(
        "what-if warm, the same question again (result cache off, per-node verdicts kept): "
        f"median {statistics.median(again) * 1000:.0f} ms"
    )
    what_if(CLAIM)
    started = time.perf_counter()
    cached = what_if(CLAIM)
    print(
        f"what-if answered from cache: {(time.perf_counter() - started) * 1000:.1f} ms "
        f"(cached={cached['cached']})"
    )
    from claims.whatif.listing import cluster_fingerprint

    fingerprints = []
    for _ in range(args.runs):
        started = time.perf_counter()
        cluster_fingerprint()
        fingerprints.append(time.perf_counter() - started)
    print(f"cluster fingerprint: median {statistics.median(fingerprints) * 1000:.1f} ms")

    for kind, changed in to_change.items():
        meta = changed["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1_000_000)
        meta.setdefault("labels", {})["bench/changed"] = "yes"
        upsert_events(kind, [(changed, None)], publish=False)
    started = time.perf_counter()
    what_if(CLAIM, use_cache=False)
    print(
        f"what-if after a cluster change (1 slice, 1 claim): "
        f"{(time.perf_counter() - started) * 1000:.0f} ms"
    )

    started = time.perf_counter()
    full = what_if(CLAIM, count="max", use_cache=False, explain=False)
    elapsed = time.perf_counter() - started
    headroom = full["headroom"]
    print(
        f"headroom until full: {headroom['placed']} copies on "
        f"{len(headroom['placements'])} nodes in {elapsed:.2f} s "
        f"({elapsed / max(headroom['placed'], 1) * 1000:.2f} ms per copy); "
        f"stranded free devices: {full['summary']['stranded']['total']}"
    )
    print(f"peak RSS: {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
