"""Benchmark of the allocator on the 1,000-node scenario of the upstream allocator issue.

Run as `.venv/bin/python tests/benchmarks/bench_allocator.py [--runs N]`. It checks that the
output equals the recorded Go output, then prints:

* cold: the first run in a fresh process (CEL compile and every selector evaluated);
* warm, new allocator: a fresh `Allocator` per run sharing the selector cache (like upstream's
  shared CEL cache across scheduling cycles);
* warm, reused allocator: the same `Allocator` asked again for every node (parsed slices and
  built pools reused too);

each as the median of several runs, total and per node, plus the number of CEL evaluations and
the uncached CEL evaluation rate. Figures are CPU time of this process (time.process_time), so
other work on a shared machine does not inflate them; the code is single-threaded, so on an idle
machine this equals wall time. Go's figure for comparison: about 48 ms for all nodes (48 µs per
node), warm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from dralib.allocator import (  # noqa: E402
    Allocator,
    SelectorCache,
    SliceCache,
    allocate_scenario,
    allocator_from_scenario,
)
from dralib.allocator.cel import (  # noqa: E402
    CELOptions,
    DeviceInput,
    compile_selector,
)
from dralib.allocator.cel import evaluations as cel_evaluations  # noqa: E402

BENCH_DIR = REPO_ROOT / ".." / "shared" / "bench"
SCENARIO = BENCH_DIR / "allocator-1000-nodes.json"
EXPECT = BENCH_DIR / "allocator-1000-nodes.expect.json"
GO_TOTAL_MS = 48.0
# Go's whole process for the same scenario, start to output (issue 12's measurement).
GO_WHOLE_PROCESS_S = 0.20


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
    evaluations_before = cel_evaluations()
    start = time.process_time()
    output = allocate_scenario(scenario, selector_cache=cache)
    cold = time.process_time() - start
    check(output, expect)
    cold_evals = cel_evaluations() - evaluations_before

    def timed_runs(make_allocator: Callable[[], Allocator] | None) -> float:
        samples = []
        reused = allocator_from_scenario(scenario, selector_cache=cache)
        for node in nodes:
            reused.allocate(node, claims)
        for _ in range(args.runs):
            start = time.process_time()
            allocator = make_allocator() if make_allocator else reused
            for node in nodes:
                allocator.allocate(node, claims)
            samples.append(time.process_time() - start)
        return statistics.median(samples)

    warm_new = timed_runs(lambda: allocator_from_scenario(scenario, selector_cache=cache))
    slices = SliceCache()
    warm_shared = timed_runs(
        lambda: allocator_from_scenario(scenario, selector_cache=cache, slice_cache=slices)
    )
    warm_reused = timed_runs(None)
    check(allocate_scenario(scenario, selector_cache=cache, slice_cache=slices), expect)

    def line(label: str, seconds: float) -> str:
        return (
            f"{label:<44} {seconds * 1e3:7.1f} ms total {seconds * 1e6 / n:7.1f} µs/node"
            f"  ({seconds * 1e3 / GO_TOTAL_MS:4.1f}x Go)"
        )

    print(f"scenario: {n} nodes, {len(scenario['slices'])} slices; output equals Go's: yes")
    print(line("cold: first run in this process", cold))
    print(line(f"warm, new allocator per run (median of {args.runs})", warm_new))
    print(line("warm, new allocator + shared slice cache", warm_shared))
    print(line("warm, one allocator asked again", warm_reused))
    print(f"CEL evaluations in the cold run: {cold_evals} (one per selector and device content)")

    # Raw CEL throughput: every device evaluated with no result cache.
    selector = compile_selector(
        'device.capacity["driver-a"].memory.compareTo(quantity("40Gi")) >= 0',
        options=CELOptions(),
    )
    inputs = [
        DeviceInput(
            driver=s["spec"]["driver"],
            attributes=d.get("attributes") or {},
            capacity=d.get("capacity") or {},
        )
        for s in scenario["slices"][:250]
        for d in s["spec"]["devices"]
    ]
    start = time.process_time()
    for device in inputs:
        selector.matches(device)
    elapsed = time.process_time() - start
    print(f"CEL evaluations per second, uncached: {len(inputs) / elapsed:,.0f}")
    lookups = cache.lookups
    print(
        f"selector cache: {len(cache._combined)} combined entries, {lookups} per-expression lookups"
    )
    whole_process(args.runs, expect)


def whole_process(runs: int, expect: dict[str, Any]) -> None:
    """`python -m claims.allocator < scenario` from start to output, as Go's binary is timed."""
    text = SCENARIO.read_bytes()
    walls, cpus = [], []
    for _ in range(runs):
        before = os.times()
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "claims.allocator"],
            input=text,
            capture_output=True,
            check=True,
            cwd=REPO_ROOT,
        )
        walls.append(time.perf_counter() - start)
        after = os.times()
        cpus.append(
            after.children_user
            + after.children_system
            - before.children_user
            - before.children_system
        )
    check(json.loads(done.stdout), expect)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(
        f"whole process (python -m claims.allocator, median of {runs}): {wall:.3f} s wall, "
        f"{cpu:.3f} s CPU ({wall / GO_WHOLE_PROCESS_S:.2f}x Go's {GO_WHOLE_PROCESS_S:.2f} s; "
        "goal <= 1.0x)"
    )


if __name__ == "__main__":
    main()
