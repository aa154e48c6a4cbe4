"""Benchmark: every pod, slimly, at 5,000 nodes x 30 pods (issue 24's figures).

Run (PostgreSQL, as the goal is set):
    eval "$(bin/services env)"
    .venv/bin/python tests/benchmarks/bench_pods.py [--nodes 5000] [--pods-per-node 30]

A fake API server in its own process serves the nodes and their pods (two containers with
requests, labels and an owner like a ReplicaSet's, a priority; one pod in ten with a host port),
as kube-apiserver would list them. Printed:

* the initial sync of the pods into PostgreSQL through the watcher's own relist (paged lists, the
  sync's write path): wall time and this process's CPU time (the database server's is its own),
  rows per second; goal ≤ 60 s for 150,000 pods;
* the web server's memory (VmRSS and VmHWM from /proc, not tracemalloc) after a fresh
  `console.serve` answered a what-if, once over the nodes alone and once with every pod: the
  difference is what the pods cost a server; goal ≤ 150 MB more;
* what one what-if with `preemption: true` costs that server (CPU, /proc), with the pods.

Load averages are printed with the figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import resource
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _measure import Server, load_average, process_memory_mb, report
from _server import setup_shared_database, start_server

SYNC_GOAL_S = 60.0
RSS_GOAL_MB = 150.0


def node_object(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_object(node: int, index: int) -> dict[str, Any]:
    app = f"app-{(node * 7 + index) % 400}"
    containers: list[dict[str, Any]] = [
        {
            "name": "main",
            "image": f"registry.example/{app}:1.0",
            "resources": {
                "requests": {"cpu": "250m", "memory": "512Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        },
        {
            "name": "sidecar",
            "image": "registry.example/proxy:2.3",
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        },
    ]
    if index % 10 == 0:
        containers[0]["ports"] = [{"containerPort": 8080 + index, "hostPort": 8080 + index}]
    name = f"{app}-{node:05d}-{index:02d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{node % 50}",
            "labels": {"app": app, "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-5d8f7c9b6",
                    "uid": f"rs-{app}",
                    "controller": True,
                }
            ],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": f"node-{node:05d}",
            "priority": (index % 3) * 100,
            "containers": containers,
            "serviceAccountName": "default",
        },
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:05Z"},
    }


def _serve(pipe: Connection, nodes: int, per_node: int, kubeconfig: str) -> None:
    from dralib.kube.fakeapi import FakeApiServer

    with FakeApiServer(bookmark_interval=5.0, history_limit=400_000) as server:
        started = time.perf_counter()
        for n in range(nodes):
            server.apply(node_object(n))
        pipe.send(("nodes", time.perf_counter() - started))
        # The pods only when asked: the first server measurement is made without them.
        pipe.recv()
        started = time.perf_counter()
        for n in range(nodes):
            for i in range(per_node):
                server.apply(pod_object(n, i))
        server.write_kubeconfig(Path(kubeconfig))
        pipe.send(("pods", time.perf_counter() - started))
        pipe.recv()


def relist(kind: str, kubeconfig: Path) -> tuple[float, float, int]:
    """One kind's initial list through the watcher's relist: (wall s, CPU s, rows)."""
    from dralib.kube.client import load_client
    from dralib.kube.discovery import discover
    from dralib.kube.kinds import KINDS
    from inventory.sync import handler_for
    from inventory.sync.watch import DatabaseSink, KindWatcher, options_from_settings, state

    spec = KINDS[kind]
    watcher = KindWatcher(
        spec,
        client_factory=lambda: load_client(kubeconfig=kubeconfig),
        sink=DatabaseSink(kind, watcher="bench"),
        stop=threading.Event(),
        options=options_from_settings(),
    )
    state.claim_kind(kind, watcher="bench")
    watcher.client = watcher.client_factory()
    watcher.version = discover(watcher.client, [spec])[kind].version
    watcher.cluster_uid = watcher._cluster_identity()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    watcher.relist()
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return wall, usage.ru_utime + usage.ru_stime - cpu, handler_for(kind).model.objects.count()


def server_memory(url: str, headers: dict[str, str], *, preemption: bool) -> dict[str, Any]:
    """A fresh server answers one what-if (its cluster state then resident): its VmRSS and
    VmHWM, and, when asked, one preemption question's cost."""
    process, base = start_server(url)
    server = Server(process.pid, base, headers)
    try:
        sample = server.request(
            "/api/claims/what-if/",
            data=json.dumps({"yaml": json.dumps(_preemptor())}).encode(),
            headers={"Content-Type": "application/json"},
        )
        out: dict[str, Any] = {
            "rss": process_memory_mb(process.pid, "VmRSS"),
            "hwm": process_memory_mb(process.pid, "VmHWM"),
            "first": sample,
        }
        if preemption:
            samples = []
            for run in range(3):
                body = {"yaml": json.dumps(_preemptor(run)), "preemption": True}
                sample = server.request(
                    "/api/claims/what-if/",
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                )
                samples.append(sample)
            out["preemption"] = samples
            out["answer"] = json.loads(samples[-1].body)
            out["hwm_after"] = process_memory_mb(process.pid, "VmHWM")
        return out
    finally:
        process.terminate()
        process.wait(timeout=30)


def _preemptor(run: int = 0) -> dict[str, Any]:
    """A pod that fits on no node as the pods leave them (63 of 64 cpu): preemption decides."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"urgent-{run}", "namespace": "team-0"},
        "spec": {
            "priorityClassName": "system-cluster-critical",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "60"}}}],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the pods' sync (wall time, top 40)"
    )
    parser.add_argument("--profile-sort", default="cumulative", help="pstats sort key")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = setup_shared_database(Path(tmp))
        from django.contrib.auth import get_user_model
        from django.db import connection
        from rest_framework.authtoken.models import Token

        user = get_user_model().objects.create_user("bench", password=None)
        headers = {"Authorization": f"Token {Token.objects.create(user=user).key}"}
        kubeconfig = Path(tmp) / "kubeconfig.yaml"
        context = multiprocessing.get_context("spawn")
        pipe, child = context.Pipe()
        api = context.Process(
            target=_serve, args=(child, args.nodes, args.pods_per_node, str(kubeconfig))
        )
        api.start()
        try:
            _, took = pipe.recv()
            print(f"database: {connection.vendor}; {args.nodes} nodes generated in {took:.1f}s")
            pipe.send("pods")
            _, took = pipe.recv()
            total = args.nodes * args.pods_per_node
            print(f"{total} pods generated in the API server's process in {took:.1f}s")
            wall, cpu, rows = relist("Node", kubeconfig)
            print(f"  nodes listed and stored: {rows} rows, {wall:.1f}s wall, {cpu:.1f}s CPU")
            connection.close()
            # The server's memory without pods: the pod table is still empty.
            bare = server_memory(url, headers, preemption=False)
            print(f"initial sync of {total} pods ({load_average()}):")
            profiler = cProfile.Profile() if args.profile else None
            if profiler is not None:
                profiler.enable()
            wall, cpu, rows = relist("Pod", kubeconfig)
            if profiler is not None:
                profiler.disable()
                pstats.Stats(profiler).sort_stats(args.profile_sort).print_stats(40)
            verdict = "met" if wall <= SYNC_GOAL_S else "MISSED"
            print(
                f"  {rows} pods stored: {wall:.1f}s wall, {cpu:.1f}s CPU of this process, "
                f"{rows / wall:.0f} pods/s; goal ≤ {SYNC_GOAL_S:g} s: {verdict}"
            )
            print(f"  sync process peak RSS (VmHWM): {process_memory_mb(os.getpid()):.0f} MB")
            size = connection.cursor()
            if connection.vendor == "postgresql":
                size.execute("SELECT pg_total_relation_size('claims_pod')")
                print(f"  claims_pod on disk: {size.fetchone()[0] / 1e6:.0f} MB (with indexes)")
            connection.close()
            full = server_memory(url, headers, preemption=True)
        finally:
            pipe.send("stop")
            api.join(timeout=60)
        more = full["rss"] - bare["rss"]
        print(f"web server memory after one what-if ({load_average()}):")
        print(f"  nodes only: VmRSS {bare['rss']:.0f} MB, VmHWM {bare['hwm']:.0f} MB")
        print(
            f"  with {total} pods: VmRSS {full['rss']:.0f} MB, VmHWM {full['hwm']:.0f} MB; "
            f"{more:+.0f} MB resident (goal ≤ +{RSS_GOAL_MB:g} MB: "
            f"{'met' if more <= RSS_GOAL_MB else 'MISSED'}), "
            f"{full['hwm'] - bare['hwm']:+.0f} MB peak"
        )
        report("first what-if of a fresh server, nodes only", [bare["first"]], goal_ms=None)
        report(f"first what-if of a fresh server, {total} pods", [full["first"]], goal_ms=None)
        preemption = full["answer"]["preemption"]
        report(
            f"what-if with preemption: true ({preemption['candidates']} candidate nodes, "
            f"{len(preemption['victims'])} victims on {preemption['node']})",
            full["preemption"],
            goal_ms=None,
        )
        print(f"  server peak RSS after the preemption questions: {full['hwm_after']:.0f} MB")


if __name__ == "__main__":
    main()
