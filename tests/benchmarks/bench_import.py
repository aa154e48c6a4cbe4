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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=["json", "yaml"], default="json")
    args = parser.parse_args()
    database = setup_fresh_database()

    import yaml

    from claims.models import ResourceClaim
    from inventory.demo import generate_demo_cluster
    from inventory.models import Device, Node
    from inventory.snapshot import import_files

    objects = generate_demo_cluster(nodes=args.nodes, seed=args.seed)
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"demo.{args.format}"
        if args.format == "json":
            path.write_text(json.dumps(document))
        else:
            path.write_text(yaml.safe_dump(document, sort_keys=False))
        size_mib = path.stat().st_size / 2**20
        rss_before = peak_rss_mib()
        tracemalloc.start()
        started = time.perf_counter()
        report = import_files([path])
        elapsed = time.perf_counter() - started
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        started = time.perf_counter()
        again = import_files([path])
        reimport = time.perf_counter() - started
    print(f"database: {database}")
    print(f"snapshot: {len(objects)} objects, {size_mib:.1f} MiB {args.format}")
    print(
        f"stored: {Node.objects.count()} nodes, {Device.objects.count()} devices, "
        f"{ResourceClaim.objects.count()} claims"
    )
    print(f"import: {elapsed:.2f} s ({len(objects) / elapsed:.0f} objects/s)")
    print(f"re-import of the same snapshot (no changes): {reimport:.2f} s, "
          f"{again.result.upserted} written")
    print(f"peak memory: {traced_peak / 2**20:.0f} MiB traced by tracemalloc during import; "
          f"process peak RSS {peak_rss_mib():.0f} MiB (before import {rss_before:.0f} MiB)")
    print(report.summary())


if __name__ == "__main__":
    main()
