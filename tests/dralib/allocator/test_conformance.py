"""Upstream conformance: every shared scenario gives exactly the Go allocator's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dralib.allocator import SelectorCache, SliceCache, allocate_scenario
from tests.paths import CONFORMANCE

UPSTREAM_DIR = CONFORMANCE
FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
SCENARIO_FILES = sorted(UPSTREAM_DIR.glob("*.json"))


def drop_empty(value: Any) -> Any:
    """Drop null values, empty lists, empty maps and empty strings recursively, like omitempty."""
    if isinstance(value, dict):
        cleaned = {k: drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, [], {}, "")}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


def test_upstream_scenarios_present() -> None:
    """The shared upstream table is there in full."""
    assert len(SCENARIO_FILES) == 223


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_upstream_scenario(path: Path) -> None:
    """The port's results equal the Go allocator's, and it errors exactly when Go errors."""
    case = json.loads(path.read_text())
    output = allocate_scenario(case["scenario"], share_id_factory=lambda: FIXED_SHARE_ID)
    expect = case["expect"]
    if expect["error"]:
        assert output["error"], f"expected an error like: {expect['error']}"
        assert output["results"] is None
    else:
        assert output["error"] == ""
        assert drop_empty(output["results"]) == drop_empty(expect["results"])


def test_upstream_scenarios_with_shared_caches() -> None:
    """Sharing one slice cache and one selector cache per CEL option set changes no answer."""
    slice_cache = SliceCache()
    selector_caches: dict[tuple[bool, bool], SelectorCache] = {}
    cases = [json.loads(path.read_text()) for path in SCENARIO_FILES]
    for case in cases * 2:
        features = case["scenario"].get("features") or {}
        key = (features.get("ConsumableCapacity", True), features.get("ListTypeAttributes", True))
        selector_cache = selector_caches.setdefault(
            key, SelectorCache(consumable_capacity=key[0], list_type_attributes=key[1])
        )
        output = allocate_scenario(
            case["scenario"],
            share_id_factory=lambda: FIXED_SHARE_ID,
            selector_cache=selector_cache,
            slice_cache=slice_cache,
        )
        expect = case["expect"]
        assert bool(output["error"]) == bool(expect["error"]), case["name"]
        assert drop_empty(output["results"]) == drop_empty(expect["results"]), case["name"]
