"""Benchmark of the allocator on the 1,000-node scenario of the upstream allocator issue.

Run as `.venv/bin/python tests/benchmarks/bench_allocator.py [--runs N]`. It checks that the
output equals the recorded Go output, then prints:

* cold: the first run in a fresh process (CEL compile and every selector evaluated);
* warm, new allocator: a fresh `Allocator` per run sharing the selector cache (like upstream's
  shared CEL cache across scheduling cycles);
* warm, reused allocator: the same `Allocator` asked again for every node (parsed slices and
  built pools reused too);

each as the median of several runs, total and per node, plus CEL evaluations per second of the
cold run. Go's figure for comparison: about 48 ms for all nodes (48 µs per node), warm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from claims.allocator import allocate_scenario, allocator_from_scenario  # noqa: E402
from claims.allocator.selection import SelectorCache  # noqa: E402

BENCH_DIR = REPO_ROOT / ".." / "shared" / "bench"
SCENARIO = BENCH_DIR / "allocator-1000-nodes.json"
EXPECT = BENCH_DIR / "allocator-1000-nodes.expect.json"
GO_TOTAL_MS = 48.0


def drop_empty(value: Any) -> Any:
    """Drop null values, empty lists, empty maps and empty strings recursively (omitempty)."""
    if isinstance(value, dict):
        cleaned = {k: drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, [], {}, "")}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


def check(output: dict[str, Any], expect: dict[str, Any]) -> None:
    """Exit with a message unless every node has the expected results and error state."""
    got, want = output["nodes"], expect["nodes"]
    if len(got) != len(want):
        sys.exit(f"MISMATCH: {len(got)} nodes, expected {len(want)}")
    for mine, theirs in zip(got, want, strict=True):
        same = (
            mine["node"] == theirs["node"]
            and drop_empty(mine["results"]) == drop_empty(theirs["results"])
            and bool(mine["error"]) == bool(theirs["error"])
        )
        if not same:
            sys.exit(f"MISMATCH on {mine['node']}: {mine} != {theirs}")


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    scenario = json.loads(SCENARIO.read_text())
    scenario = scenario.get("scenario", scenario)
    expect = json.loads(EXPECT.read_text())
    nodes = scenario["nodes"]
    claims = scenario["claims"]
    n = len(nodes)

    cache = SelectorCache()
    start = time.perf_counter()
    output = allocate_scenario(scenario, selector_cache=cache)
    cold = time.perf_counter() - start
    check(output, expect)
    cold_evals = cache.evaluations

    # Time spent in CEL alone: evaluate the distinct selector/device pairs again uncached.
    timing_cache = SelectorCache()
    allocator = allocator_from_scenario(scenario, selector_cache=timing_cache)
    start = time.perf_counter()
    allocator.allocate(nodes[0], claims)
    first_node = time.perf_counter() - start

    warm_new: list[float] = []
    for _ in range(args.runs):
        start = time.perf_counter()
        allocator = allocator_from_scenario(scenario, selector_cache=cache)
        for node in nodes:
            allocator.allocate(node, claims)
        warm_new.append(time.perf_counter() - start)

    warm_reused: list[float] = []
    allocator = allocator_from_scenario(scenario, selector_cache=cache)
    for _ in range(args.runs):
        start = time.perf_counter()
        for node in nodes:
            allocator.allocate(node, claims)
        warm_reused.append(time.perf_counter() - start)

    output = allocate_scenario(scenario, selector_cache=cache)
    check(output, expect)

    def line(label: str, seconds: float) -> str:
        return (
            f"{label:<34} {seconds * 1e3:8.1f} ms total  {seconds * 1e6 / n:7.1f} µs/node"
            f"  ({seconds * 1e3 / GO_TOTAL_MS:4.1f}x Go)"
        )

    print(f"scenario: {n} nodes, {len(scenario['slices'])} slices, output matches Go: yes")
    print(line("cold (first run, fresh process)", cold))
    print(line("warm, new allocator (median)", statistics.median(warm_new)))
    print(line("warm, reused allocator (median)", statistics.median(warm_reused)))
    print(
        f"CEL: {cold_evals} evaluations in the cold run (distinct selector x device content); "
        f"selector lookups per run: {cache.lookups // (args.runs * 2 + 2)}"
    )
    if cold_evals:
        print(f"first node incl. CEL compile: {first_node * 1e3:.2f} ms")
    evals = 0
    start = time.perf_counter()
    fresh = SelectorCache()
    for slice_info in allocator.slices:
        for device in slice_info.devices:
            fresh._results.clear()
            fresh.matches('device.driver == "driver-a"', device)
            evals += 1
    elapsed = time.perf_counter() - start
    print(f"CEL evaluations per second (uncached, one per device): {evals / elapsed:,.0f}")


if __name__ == "__main__":
    main()
