"""Command line: `python -m claims.allocator` runs scenarios in the shared conformance format.

Reads one scenario object on stdin and prints `{"results": ..., "error": ...}` (or
`{"nodes": [...]}` for a scenario with `nodes`). With `--jsonl`, reads one scenario per line and
prints one output per line, flushing after each. `--share-id` fixes the shareID given to shared
devices; `--explain` adds an `explain` entry with per-request reasons when claims do not fit;
`--timeout SECONDS` bounds the search of each scenario (past it, the error says it gave up).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from dralib.allocator.allocator import allocate_scenario
from dralib.allocator.explain import explain_scenario
from dralib.allocator.selection import SelectorCache


def _run_one(
    text: str,
    *,
    share_id_factory: Callable[[], str] | None,
    explain: bool,
    caches: dict[tuple[bool, bool], SelectorCache],
    timeout: float | None = None,
) -> dict[str, Any]:
    try:
        # orjson: a 1,000-node scenario parses in a fraction of the json module's time, which
        # counts when the whole process is what is timed (one scenario per run).
        scenario = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return {"results": None, "error": f"scenario: invalid JSON: {exc}"}
    if not isinstance(scenario, dict):
        return {"results": None, "error": "scenario: expected a JSON object"}
    features = scenario.get("features") or {}
    key = (
        bool(features.get("ConsumableCapacity", True)),
        bool(features.get("ListTypeAttributes", True)),
    )
    cache = caches.get(key)
    if cache is None:
        cache = SelectorCache(consumable_capacity=key[0], list_type_attributes=key[1])
        caches[key] = cache
    deadline = time.monotonic() + timeout if timeout is not None else None
    output = allocate_scenario(
        scenario, share_id_factory=share_id_factory, selector_cache=cache, deadline=deadline
    )
    if explain:
        output["explain"] = explain_scenario(scenario, output, selector_cache=cache)
    return output


def main(argv: list[str] | None = None, *, stdin: TextIO | None = None) -> int:
    """Run the CLI; returns the exit status (0 even when an allocation reports an error)."""
    parser = argparse.ArgumentParser(
        prog="python -m claims.allocator",
        description="Allocate the claims of a scenario like the Kubernetes structured allocator.",
    )
    parser.add_argument("--jsonl", action="store_true", help="one scenario per input line")
    parser.add_argument("--share-id", help="use this shareID instead of random UUIDs")
    parser.add_argument(
        "--explain", action="store_true", help="add per-request reasons when claims do not fit"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="give up on a scenario's search after this many seconds",
    )
    args = parser.parse_args(argv)
    source = stdin if stdin is not None else sys.stdin
    share_id = args.share_id
    factory: Callable[[], str] | None = (lambda: share_id) if share_id else None
    caches: dict[tuple[bool, bool], SelectorCache] = {}
    if args.jsonl:
        for line in source:
            if not line.strip():
                continue
            output = _run_one(
                line,
                share_id_factory=factory,
                explain=args.explain,
                caches=caches,
                timeout=args.timeout,
            )
            sys.stdout.write(_dumps(output))
            sys.stdout.flush()
        return 0
    # One scenario: the cyclic collector would only rescan the parsed scenario while the search
    # runs (reference counting still frees what it drops), a tenth of the whole process's time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        output = _run_one(
            source.read(),
            share_id_factory=factory,
            explain=args.explain,
            caches=caches,
            timeout=args.timeout,
        )
    finally:
        if enabled:
            gc.enable()
    sys.stdout.write(_dumps(output))
    sys.stdout.flush()
    return 0


def _dumps(output: dict[str, Any]) -> str:
    """One output line of JSON (UTF-8 as orjson writes it; json.dumps for what orjson refuses)."""
    try:
        return orjson.dumps(output, option=orjson.OPT_APPEND_NEWLINE).decode()
    except TypeError:
        return json.dumps(output) + "\n"


if __name__ == "__main__":
    sys.exit(main())
