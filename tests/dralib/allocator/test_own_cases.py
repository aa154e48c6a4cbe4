"""Own scenarios for what upstream leaves thin: multi-node runs, allocatedClaims, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dralib.allocator import Allocator, Features, allocate_scenario
from tests.dralib.allocator.test_conformance import drop_empty

SCENARIO_DIR = Path(__file__).parent / "scenarios"
SCENARIO_FILES = sorted(SCENARIO_DIR.glob("*.json"))


def _check(output: dict[str, Any], expect: dict[str, Any]) -> None:
    if expect["error"]:
        assert expect["error"] in output["error"]
        assert output["results"] is None
    else:
        assert output["error"] == ""
        assert drop_empty(output["results"]) == drop_empty(expect["results"])


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_own_scenario(path: Path) -> None:
    """Each own scenario gives the hand-derived result written in the file."""
    case = json.loads(path.read_text())
    output = allocate_scenario(case["scenario"])
    expect = case["expect"]
    if "nodes" in expect:
        assert [n["node"] for n in output["nodes"]] == [n["node"] for n in expect["nodes"]]
        for got, want in zip(output["nodes"], expect["nodes"], strict=True):
            _check(got, want)
    else:
        _check(output, expect)


def test_allocator_reused_across_nodes_matches_fresh_allocators() -> None:
    """Asking one Allocator node after node gives what a fresh allocator per node gives."""
    case = json.loads((SCENARIO_DIR / "nodes-local-and-network-attached.json").read_text())
    scenario = case["scenario"]
    shared = Allocator(classes=scenario["classes"], slices=scenario["slices"])
    for node in scenario["nodes"] * 2:
        fresh = Allocator(classes=scenario["classes"], slices=scenario["slices"])
        assert shared.allocate(node, scenario["claims"]) == fresh.allocate(node, scenario["claims"])


def test_share_id_is_injected() -> None:
    """Devices that allow multiple allocations get the share ID from the injected factory."""
    scenario: dict[str, Any] = {
        "node": {"metadata": {"name": "node-1"}},
        "classes": [{"metadata": {"name": "c"}, "spec": {}}],
        "slices": [
            {
                "metadata": {"name": "s"},
                "spec": {
                    "driver": "d.example.com",
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "node-1",
                    "devices": [
                        {
                            "name": "nic",
                            "allowMultipleAllocations": True,
                            "capacity": {"bandwidth": {"value": "10G"}},
                        }
                    ],
                },
            }
        ],
        "claims": [
            {
                "metadata": {"name": f"claim-{i}"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {
                                    "deviceClassName": "c",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                    "capacity": {"requests": {"bandwidth": "4G"}},
                                },
                            }
                        ]
                    }
                },
            }
            for i in range(3)
        ],
    }
    ids = iter(["share-1", "share-2", "share-3"])
    output = allocate_scenario(scenario, share_id_factory=lambda: next(ids))
    # 10G holds two shares of 4G; the third claim does not fit.
    assert output == {"results": None, "error": ""}
    scenario["claims"] = scenario["claims"][:2]
    ids = iter(["share-1", "share-2"])
    output = allocate_scenario(scenario, share_id_factory=lambda: next(ids))
    shares = [r["devices"]["results"][0] for r in output["results"]]
    assert [s["shareID"] for s in shares] == ["share-1", "share-2"]
    assert [s["consumedCapacity"] for s in shares] == [{"bandwidth": "4G"}] * 2


def test_unknown_feature_is_an_error() -> None:
    """A misspelt feature name is reported instead of silently enabling everything."""
    output = allocate_scenario({"node": {}, "features": {"AdminAcess": False}, "claims": []})
    assert "AdminAcess" in output["error"]


def test_features_default_to_enabled() -> None:
    """A feature missing from the map is enabled, as the contract says."""
    features = Features.from_dict({"AdminAccess": False})
    assert features.AdminAccess is False
    assert features.PrioritizedList is True
    assert features.ConsumableCapacity is True


MALFORMED = [
    {"node": {"metadata": {"name": "n"}}, "claims": [{"spec": {"devices": {"config": ["x"]}}}]},
    {"node": {"metadata": {"name": "n"}}, "claims": [{"spec": {"devices": {"requests": [{}]}}}]},
    {"node": {"metadata": {"name": "n"}}, "slices": [{"spec": {"driver": "d"}}], "claims": []},
    {"node": {"metadata": {"name": "n"}}, "allocatedDevices": ["nodash"], "claims": []},
    {"node": {"metadata": {"name": "n"}}, "classes": [{"spec": {}}], "claims": []},
    {"node": "node-1", "claims": []},
    {"claims": []},
]


@pytest.mark.parametrize("scenario", MALFORMED)
def test_malformed_input_gives_an_error_not_a_crash(scenario: dict[str, Any]) -> None:
    """Objects of the wrong shape give an error output that says what is wrong."""
    output = allocate_scenario(scenario)
    assert output["results"] is None
    assert output["error"]
