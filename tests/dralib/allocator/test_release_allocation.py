"""`Allocator.release_allocation`: the inverse of `record_allocation`.

The reference is the allocator before anything was recorded: recording results and releasing them
again must leave an allocator that answers exactly as it did at first.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dralib.allocator import AllocationError, Allocator, Features, ScenarioError
from dralib.allocator import allocator_from_scenario as from_scenario
from tests.dralib.allocator.test_record_allocation import _partitionable_case, _single_node_cases

SHARE = {
    "request": "r",
    "driver": "d",
    "pool": "p",
    "device": "nic",
    "shareID": "s-1",
    "consumedCapacity": {"bandwidth": "1G"},
}


def _share_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"cccccccc-cccc-cccc-cccc-{next(counter):012d}"


@pytest.mark.parametrize("path", _single_node_cases(), ids=lambda p: p.stem)
def test_release_undoes_record(path: Path) -> None:
    """After recording an allocation and releasing it, the allocator answers as it did first."""
    scenario: dict[str, Any] = json.loads(path.read_text())["scenario"]
    node, claims = scenario["node"], scenario.get("claims") or []
    allocator = from_scenario(scenario, share_id_factory=_share_ids())
    try:
        first = allocator.allocate(node, claims)
    except AllocationError:
        return
    if first is None:
        return
    before = allocator.allocated_state.copy()
    allocator.record_allocation(first)
    allocator.release_allocation(first)
    assert allocator.allocated_state.allocated_devices == before.allocated_devices
    assert (
        allocator.allocated_state.allocated_shared_device_ids == before.allocated_shared_device_ids
    )
    allocator.share_id_factory = _share_ids()
    assert allocator.allocate(node, claims) == first


def test_release_frees_counters() -> None:
    """A released partition gives its counters back, so a later allocation can use them."""
    scenario = _partitionable_case()
    allocator = from_scenario(scenario)
    first = allocator.allocate(scenario["node"], scenario["claims"])
    assert first is not None
    allocator.record_allocation(first)
    second = allocator.allocate(scenario["node"], scenario["claims"])
    assert second is not None and second != first
    allocator.record_allocation(second)
    assert allocator.allocate(scenario["node"], scenario["claims"]) is None
    assert allocator.release_allocation(first) == [
        (r["driver"], r["pool"], r["device"]) for r in first[0]["devices"]["results"]
    ]
    assert allocator.allocate(scenario["node"], scenario["claims"]) == first


def test_release_shares_one_by_one() -> None:
    """A shared device stays allocated, with less capacity, until its last share is released."""
    allocator = Allocator(classes=[], slices=[], features=Features(ConsumableCapacity=True))
    second = {**SHARE, "shareID": "s-2"}
    allocator.record_allocation([{"devices": {"results": [SHARE, second]}}])
    state = allocator.allocated_state
    assert allocator.release_allocation([{"devices": {"results": [SHARE]}}]) == []
    assert state.is_device_allocated(("d", "p", "nic"))
    assert str(state.aggregated_capacity[("d", "p", "nic")]["bandwidth"]) == "1G"
    # Releasing the same share again changes nothing.
    assert allocator.release_allocation([{"devices": {"results": [SHARE]}}]) == []
    assert str(state.aggregated_capacity[("d", "p", "nic")]["bandwidth"]) == "1G"
    assert allocator.release_allocation([{"devices": {"results": [second]}}]) == [("d", "p", "nic")]
    assert not state.is_device_allocated(("d", "p", "nic"))
    assert state.aggregated_capacity == {}


def test_release_skips_admin_access_and_rejects_malformed_results() -> None:
    """Admin-access results held nothing; a result without a device is an error."""
    allocator = Allocator(classes=[], slices=[])
    held = {"request": "r", "driver": "d", "pool": "p", "device": "a"}
    admin = {**held, "adminAccess": True}
    allocator.record_allocation([{"devices": {"results": [held]}}])
    assert allocator.release_allocation([{"devices": {"results": [admin]}}]) == []
    assert allocator.allocated_state.is_device_allocated(("d", "p", "a"))
    with pytest.raises(ScenarioError, match=r"results\[0\]\.devices\.results: missing device"):
        allocator.release_allocation([{"devices": {"results": [{"driver": "d", "pool": "p"}]}}])
