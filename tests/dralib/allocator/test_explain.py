"""Explain: per request, how many devices each filter stage leaves when claims do not fit."""

from __future__ import annotations

from typing import Any

from dralib.allocator import AllocatedState, Allocator
from dralib.allocator.explain import STAGES, explain

NODE = {"metadata": {"name": "node-1"}}
CLASS = {
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def device(name: str, model: str, **extra: Any) -> dict[str, Any]:
    """A device with a model attribute."""
    return {"name": name, "attributes": {"model": {"string": model}}, **extra}


SLICE = {
    "metadata": {"name": "slice-1"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [
            device("d0", "a100"),
            device("d1", "h100"),
            device("d2", "h100"),
            device("d3", "h100", taints=[{"key": "bad", "effect": "NoSchedule"}]),
        ],
    },
}
OTHER_DRIVER_SLICE = {
    "metadata": {"name": "slice-2"},
    "spec": {
        "driver": "nic.example.com",
        "pool": {"name": "pool-2", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [{"name": "n0"}],
    },
}


def claim(count: int, *, selector: str = "") -> dict[str, Any]:
    """A claim for `count` devices of class gpu, optionally with a request selector."""
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": "ExactCount"}
    exactly["count"] = count
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "metadata": {"name": "claim-0", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def stage_counts(allocator: Allocator, claims: list[dict[str, Any]]) -> dict[str, int]:
    """The funnel of the only request, as a stage -> remaining map."""
    [report] = explain(allocator, node=NODE, claims=claims)
    assert [s.stage for s in report.stages] == list(STAGES)
    return {s.stage: s.remaining for s in report.stages}


def test_funnel_counts_each_stage() -> None:
    """Other drivers, the wrong model, a taint and an allocated device are each counted out."""
    state = AllocatedState(allocated_devices={("gpu.example.com", "pool-1", "d1")})
    allocator = Allocator(
        classes=[CLASS], slices=[SLICE, OTHER_DRIVER_SLICE], allocated_state=state
    )
    claims = [claim(2, selector='device.attributes["gpu.example.com"].model == "h100"')]
    assert allocator.allocate(NODE, claims) is None
    counts = stage_counts(allocator, claims)
    assert counts["pools"] == 5
    assert counts["class selectors"] == 4
    assert counts["request selectors"] == 3
    assert counts["node access"] == 3
    assert counts["taints"] == 2
    assert counts["already allocated"] == 1
    [report] = explain(allocator, node=NODE, claims=claims)
    assert report.claim == "ns/claim-0"
    assert report.request == "gpus"
    assert report.wanted == 2
    # Two devices survive the taint; the allocated d1 leaves one for a request of two.
    assert report.blocking_stage == "already allocated"
    assert "only 1 left after already allocated" in report.message


def test_constraint_stage_counts_largest_matching_group() -> None:
    """With matchAttribute on model, only devices of one model count as able to go together."""
    allocator = Allocator(classes=[CLASS], slices=[SLICE])
    request_claim = claim(4)
    request_claim["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.example.com/model"}]
    assert allocator.allocate(NODE, [request_claim]) is None
    counts = stage_counts(allocator, [request_claim])
    # d3 is tainted, so d1 and d2 are the h100s left; d0 alone is an a100.
    assert counts["counters or capacity"] == 3
    assert counts["constraints"] == 2


def test_input_error_is_reported() -> None:
    """An unknown class gives a single report carrying the allocator's error."""
    allocator = Allocator(classes=[], slices=[SLICE])
    [report] = explain(allocator, node=NODE, claims=[claim(1)])
    assert report.message.startswith("error:")
    assert "could not retrieve device class gpu" in report.message


def test_competing_requests_are_called_out() -> None:
    """Two claims that each fit alone but not together say so."""
    allocator = Allocator(classes=[CLASS], slices=[SLICE])
    claims = [claim(2), {**claim(2), "metadata": {"name": "claim-1"}}]
    assert allocator.allocate(NODE, claims) is None
    reports = explain(allocator, node=NODE, claims=claims)
    assert len(reports) == 2
    assert all(not r.blocking_stage for r in reports)
    assert all("together they do not fit" in r.message for r in reports)
