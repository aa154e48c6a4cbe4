"""Benchmark: import a 1,000-node demo snapshot (JSON file) into a fresh database.

Run: .venv/bin/python tests/benchmarks/bench_import.py [--nodes 1000] [--format json|yaml]
Set DASHBOARD_DATABASE_URL to measure on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from _django import peak_rss_mib, setup_fresh_database


def clear_database() -> None:
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=["json", "yaml"], default="json")
    args = parser.parse_args()
    database = setup_fresh_database()

    from claims.models import ResourceClaim
    from demo.generator import generate_demo_cluster
    from dralib.kube.documents import dump_yaml, load_documents
    from inventory.models import Device, Node
    from inventory.snapshot import import_files, import_limits

    objects = generate_demo_cluster(nodes=args.nodes, seed=args.seed)
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"demo.{args.format}"
        if args.format == "json":
            path.write_text(json.dumps(document))
        else:
            with path.open("w") as out:
                dump_yaml(document, out)
        size_mib = path.stat().st_size / 2**20
        # The parse alone (read and check the text, build the objects), as issue 12 timed it.
        started = time.perf_counter()
        for _ in load_documents(path.read_bytes(), source=path.name, limits=import_limits()):
            pass
        parse = time.perf_counter() - started
        rss_before = peak_rss_mib()
        # Timed without tracemalloc (it slows Python several-fold); memory measured in a second,
        # traced run of the same import on an emptied database.
        started = time.perf_counter()
        report = import_files([path])
        elapsed = time.perf_counter() - started
        rss_after = peak_rss_mib()
        started = time.perf_counter()
        again = import_files([path])
        reimport = time.perf_counter() - started
        clear_database()
        tracemalloc.start()
        import_files([path])
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"database: {database}")
    print(f"snapshot: {len(objects)} objects, {size_mib:.1f} MiB {args.format}")
    print(
        f"stored: {Node.objects.count()} nodes, {Device.objects.count()} devices, "
        f"{ResourceClaim.objects.count()} claims"
    )
    goal = (
        "goal <= 5 s for the 1,000-node JSON"
        if args.format == "json"
        else ("goal <= 30 s for a 49 MB YAML snapshot")
    )
    parse_goal = f"goal <= 30 s for 49 MB, {30 * size_mib / 49:.1f} s in proportion"
    if args.format == "json":
        parse_goal = "no goal"
    print(f"parse of the {size_mib:.1f} MiB {args.format} text: {parse:.2f} s ({parse_goal})")
    print(f"import: {elapsed:.2f} s ({len(objects) / elapsed:.0f} objects/s; {goal})")
    print(
        f"re-import of the same snapshot (no changes): {reimport:.2f} s, "
        f"{again.result.upserted} written"
    )
    print(
        f"peak memory: {traced_peak / 2**20:.0f} MiB allocated by Python during the import "
        f"(tracemalloc); process peak RSS {rss_after:.0f} MiB after the first import "
        f"({rss_before:.0f} MiB with the generated cluster in memory before it; goal <= 300 MB)"
    )
    print(report.summary())


if __name__ == "__main__":
    main()
