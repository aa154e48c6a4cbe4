"""`Allocator.record_allocation` and the indexed `AllocatedState` lookups.

The reference for recording is rebuilding: an allocator that recorded results must answer
exactly like a fresh allocator whose allocated state holds the same results as allocated claims.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dralib.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    Features,
    ScenarioError,
    SliceCache,
    allocator_from_scenario,
)
from dralib.allocator.types import JSON
from tests.dralib.allocator.test_conformance import SCENARIO_FILES

SHARE_PREFIX = "bbbbbbbb-bbbb-bbbb-bbbb-"
ROUNDS = 3


def _share_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{SHARE_PREFIX}{next(counter):012d}"


def _as_claims(claims: list[JSON], results: list[JSON]) -> list[JSON]:
    return [
        {**claim, "status": {"allocation": result}}
        for claim, result in zip(claims, results, strict=True)
    ]


def _single_node_cases() -> list[Path]:
    """Upstream scenarios for one node whose input an allocator accepts."""
    cases = []
    for path in SCENARIO_FILES:
        scenario = json.loads(path.read_text())["scenario"]
        if scenario.get("node") is None or scenario.get("nodes"):
            continue
        try:
            allocator_from_scenario(scenario)
        except AllocationError:
            continue
        cases.append(path)
    return cases


@pytest.mark.parametrize("path", _single_node_cases(), ids=lambda p: p.stem)
def test_recorded_rounds_match_rebuilt_allocator(path: Path) -> None:
    """Allocating again after record_allocation equals a rebuild with those claims allocated."""
    scenario: dict[str, Any] = json.loads(path.read_text())["scenario"]
    node, claims = scenario["node"], scenario.get("claims") or []
    incremental = allocator_from_scenario(scenario, share_id_factory=_share_ids())
    recorded: list[JSON] = []
    for round_index in range(ROUNDS):
        rebuilt_scenario = copy.deepcopy(scenario)
        rebuilt_scenario["allocatedClaims"] = [
            *(scenario.get("allocatedClaims") or []),
            *recorded,
        ]
        rebuilt = allocator_from_scenario(rebuilt_scenario, share_id_factory=_share_ids())
        incremental.share_id_factory = _share_ids()
        try:
            got = incremental.allocate(node, claims)
        except AllocationError as exc:
            with pytest.raises(AllocationError) as rebuilt_error:
                rebuilt.allocate(node, claims)
            assert str(rebuilt_error.value) == str(exc)
            return
        assert got == rebuilt.allocate(node, claims), f"round {round_index}"
        assert rebuilt.allocated_state == incremental.allocated_state
        if got is None:
            return
        incremental.record_allocation(got)
        recorded.extend(_as_claims(claims, got))


def _partitionable_case() -> dict[str, Any]:
    """Two GPUs sharing one memory counter of 8Gi; each partition consumes 4Gi or 8Gi."""
    counters = {"counterSet": "gpu-0", "counters": {"memory": {"value": "4Gi"}}}
    whole = {"counterSet": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}
    return {
        "node": {"metadata": {"name": "node-1"}},
        "classes": [{"metadata": {"name": "gpu"}, "spec": {}}],
        "slices": [
            {
                "metadata": {"name": "counters"},
                "spec": {
                    "driver": "gpu.example.com",
                    "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 2},
                    "nodeName": "node-1",
                    "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}],
                },
            },
            {
                "metadata": {"name": "devices"},
                "spec": {
                    "driver": "gpu.example.com",
                    "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 2},
                    "nodeName": "node-1",
                    "devices": [
                        {"name": "half-0", "consumesCounters": [counters]},
                        {"name": "half-1", "consumesCounters": [counters]},
                        {"name": "whole", "consumesCounters": [whole]},
                    ],
                },
            },
        ],
        "claims": [
            {
                "metadata": {"name": "c", "namespace": "default", "uid": "u"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {
                                    "deviceClassName": "gpu",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                },
            }
        ],
    }


def test_record_allocation_updates_shared_counters() -> None:
    """Counters consumed by recorded devices are no longer available to later allocations."""
    scenario = _partitionable_case()
    allocator = allocator_from_scenario(scenario)
    picked = []
    while (results := allocator.allocate(scenario["node"], scenario["claims"])) is not None:
        picked.append(results[0]["devices"]["results"][0]["device"])
        assert allocator.record_allocation(results)
    # Two halves use the whole counter, so the whole device never fits afterwards.
    assert picked == ["half-0", "half-1"]


def test_record_allocation_returns_only_newly_allocated_devices() -> None:
    """A device already allocated, or held with admin access, is not reported as new."""
    allocator = Allocator(classes=[], slices=[])
    result = {
        "devices": {
            "results": [
                {"request": "r", "driver": "d", "pool": "p", "device": "a"},
                {"request": "r", "driver": "d", "pool": "p", "device": "b", "adminAccess": True},
            ]
        }
    }
    assert allocator.record_allocation([result]) == [("d", "p", "a")]
    assert allocator.record_allocation([result]) == []
    assert allocator.allocated_state.is_device_allocated(("d", "p", "a"))
    assert not allocator.allocated_state.is_device_allocated(("d", "p", "b"))


def test_record_allocation_shares_with_consumable_capacity() -> None:
    """A result with a shareID is a share whose consumed capacity adds up."""
    allocator = Allocator(classes=[], slices=[], features=Features(ConsumableCapacity=True))
    share = {
        "request": "r",
        "driver": "d",
        "pool": "p",
        "device": "nic",
        "shareID": "s-1",
        "consumedCapacity": {"bandwidth": "1G"},
    }
    second = {**share, "shareID": "s-2"}
    assert allocator.record_allocation([{"devices": {"results": [share]}}]) == [("d", "p", "nic")]
    assert allocator.record_allocation([{"devices": {"results": [second]}}]) == []
    state = allocator.allocated_state
    assert state.allocated_devices == set()
    assert state.allocated_shared_device_ids == {("d", "p", "nic", "s-1"), ("d", "p", "nic", "s-2")}
    assert str(state.aggregated_capacity[("d", "p", "nic")]["bandwidth"]) == "2G"


def test_record_allocation_rejects_malformed_results() -> None:
    """A result without a device, or not an object, is an error naming where it is."""
    allocator = Allocator(classes=[], slices=[])
    with pytest.raises(ScenarioError, match=r"results\[0\]\.devices\.results: missing device"):
        allocator.record_allocation([{"devices": {"results": [{"driver": "d", "pool": "p"}]}}])
    with pytest.raises(ScenarioError, match=r"results\[0\]: expected an AllocationResult"):
        allocator.record_allocation(["not an object"])  # type: ignore[list-item]


def test_is_device_allocated_sees_shares_added_any_way() -> None:
    """Shares added by method, in the constructor or straight into the set are all found."""
    state = AllocatedState(allocated_shared_device_ids={("d", "p", "a", "1")})
    assert state.is_device_allocated(("d", "p", "a"))
    state.add_shared_device(("d", "p", "b"), "2")
    assert state.is_device_allocated(("d", "p", "b"))
    state.allocated_shared_device_ids.add(("d", "p", "c", "3"))
    assert state.is_device_allocated(("d", "p", "c"))
    assert not state.is_device_allocated(("d", "p", "x"))


def test_allocated_state_copy_is_independent() -> None:
    """Changes to a copy do not show in the original and the other way round."""
    state = AllocatedState(allocated_devices={("d", "p", "a")})
    duplicate = state.copy()
    duplicate.add_shared_device(("d", "p", "b"), "1")
    state.allocated_devices.add(("d", "p", "c"))
    assert not state.is_device_allocated(("d", "p", "b"))
    assert not duplicate.is_device_allocated(("d", "p", "c"))
    assert duplicate.is_device_allocated(("d", "p", "a"))


def test_assigning_allocated_state_forgets_counters() -> None:
    """Replacing the allocated state makes freed counters available again."""
    scenario = _partitionable_case()
    allocator = allocator_from_scenario(scenario)
    fresh_state = allocator.allocated_state.copy()
    first = allocator.allocate(scenario["node"], scenario["claims"])
    assert first is not None
    allocator.record_allocation(first)
    allocator.allocated_state = fresh_state
    assert allocator.allocate(scenario["node"], scenario["claims"]) == first


def test_slice_cache_retain_keeps_unchanged_slices_parsed() -> None:
    """retain drops slices (and their pools) that are gone and keeps the others' parse."""
    scenario = _partitionable_case()
    cache = SliceCache()
    slices = scenario["slices"]
    allocator = Allocator(classes=scenario["classes"], slices=slices, slice_cache=cache)
    assert allocator.allocate(scenario["node"], scenario["claims"]) is not None
    assert len(cache) == 2 and cache.pools
    kept = cache.parse(slices[0], index=0)
    replaced = copy.deepcopy(slices[1])
    assert cache.retain([slices[0], replaced]) == 1
    assert len(cache) == 1 and not cache.pools
    assert cache.parse(slices[0], index=0) is kept
