"""`python -m claims.allocator` as a subprocess: one scenario, --jsonl, nodes and --explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.dralib.allocator.test_conformance import FIXED_SHARE_ID, UPSTREAM_DIR, drop_empty
from tests.paths import ROOT

OWN_DIR = Path(__file__).parent / "scenarios"
UPSTREAM_SAMPLES = [
    "simple.json",
    "all-devices-invalid-CEL.json",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient.json",
    "prioritized-list-subrequests-with-allocation-mode-all.json",
]


def run_cli(args: list[str], stdin: str) -> list[dict[str, Any]]:
    """Run the CLI and return the JSON objects it printed, one per line."""
    completed = subprocess.run(
        [sys.executable, "-m", "claims.allocator", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in completed.stdout.splitlines()]


def load(path: Path) -> dict[str, Any]:
    """Read a scenario file."""
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_single_scenario_on_stdin() -> None:
    """One scenario in, one output object out, equal to the Go allocator's results."""
    case = load(UPSTREAM_DIR / "simple.json")
    [output] = run_cli([], json.dumps(case["scenario"]))
    assert output["error"] == ""
    assert drop_empty(output["results"]) == drop_empty(case["expect"]["results"])


def test_jsonl_keeps_order_and_errors() -> None:
    """--jsonl prints one line per scenario line, in order, errors included."""
    cases = [load(UPSTREAM_DIR / name) for name in UPSTREAM_SAMPLES]
    stdin = "".join(json.dumps(c["scenario"]) + "\n" for c in cases)
    outputs = run_cli(["--jsonl", "--share-id", FIXED_SHARE_ID], stdin)
    assert len(outputs) == len(cases)
    for case, output in zip(cases, outputs, strict=True):
        if case["expect"]["error"]:
            assert output["error"] and output["results"] is None
        else:
            assert drop_empty(output["results"]) == drop_empty(case["expect"]["results"])


def test_nodes_scenario_output_shape() -> None:
    """A scenario with nodes gives one entry per node, in input order."""
    case = load(OWN_DIR / "nodes-local-device-taken.json")
    [output] = run_cli([], json.dumps(case["scenario"]))
    assert [entry["node"] for entry in output["nodes"]] == ["node-a", "node-b"]
    for got, want in zip(output["nodes"], case["expect"]["nodes"], strict=True):
        assert drop_empty(got["results"]) == drop_empty(want["results"])


def test_bad_json_is_reported() -> None:
    """Input that is not JSON gives an error output, not a traceback."""
    [output] = run_cli([], "{not json")
    assert output["results"] is None
    assert "invalid JSON" in output["error"]


def test_explain_flag_adds_reasons_only_when_not_fitting() -> None:
    """--explain adds per-request reasons for nodes where the claims do not fit."""
    case = load(OWN_DIR / "nodes-local-device-taken.json")
    [output] = run_cli(["--explain"], json.dumps(case["scenario"]))
    assert set(output["explain"]) == {"node-a"}
    [report] = output["explain"]["node-a"]
    assert report["blocking_stage"] == "already allocated"
