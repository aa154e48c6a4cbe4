"""The search's time budget and cancellation, and its independence from the recursion limit."""

from __future__ import annotations

import io
import json
import sys
import time
from typing import Any

import pytest

import dralib.allocator.__main__ as cli
from dralib.allocator import AllocationTimeout, Allocator, budget
from dralib.allocator.__main__ import main
from dralib.allocator.budget import CHECK_EVERY
from tests import clock

NODE = {"metadata": {"name": "node-1"}}
CLASSES = [{"metadata": {"name": "gpu"}, "spec": {}}]


def _slices(num_devices: int) -> list[dict[str, Any]]:
    """One pool on node-1 of `num_devices` devices, in slices of at most 100 devices."""
    per_slice = 100
    count = (num_devices + per_slice - 1) // per_slice
    return [
        {
            "metadata": {"name": f"slice-{s:02d}"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": count},
                "nodeName": "node-1",
                "devices": [
                    {"name": f"gpu-{i:04d}"}
                    for i in range(s * per_slice, min((s + 1) * per_slice, num_devices))
                ],
            },
        }
        for s in range(count)
    ]


def _pathological_claim() -> dict[str, Any]:
    # Nine requests, each with two one-device alternatives, over eight devices: no solution,
    # and the search tries every way of giving eight of the requests a device first.
    sub = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    requests = [
        {"name": f"r{i}", "firstAvailable": [{"name": "a", **sub}, {"name": "b", **sub}]}
        for i in range(9)
    ]
    return {"metadata": {"name": "greedy"}, "spec": {"devices": {"requests": requests}}}


def test_deadline_stops_an_exponential_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search with no solution stops with AllocationTimeout at its first check past the deadline.

    Each clock reading is a tenth of a second: a 0.5 s budget is five readings (the check
    before any step is the start, and takes one), so the search ends at its fourth check after
    steps began, about 4 * CHECK_EVERY steps in; an exhaustive search would take millions.
    """
    ticking = clock.install(monkeypatch, budget, tick=0.1)
    allocator = Allocator(classes=CLASSES, slices=_slices(8), deadline=ticking.now + 0.5)
    with pytest.raises(AllocationTimeout) as caught:
        allocator.allocate(NODE, [_pathological_claim()])
    assert ticking.readings == 5
    assert 4 * CHECK_EVERY <= caught.value.steps < 5 * CHECK_EVERY
    assert caught.value.elapsed == pytest.approx(0.4)
    assert caught.value.cancelled is False
    assert caught.value.claims_total == 1
    assert "gave up after" in str(caught.value)


def test_cancellation_stops_the_search() -> None:
    """A `cancelled` callable that turns True stops the search at the next check."""
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) >= 3

    allocator = Allocator(classes=CLASSES, slices=_slices(8), cancelled=cancelled)
    with pytest.raises(AllocationTimeout) as caught:
        allocator.allocate(NODE, [_pathological_claim()])
    assert caught.value.cancelled is True
    assert len(calls) == 3
    assert "cancelled" in str(caught.value)


def test_deadline_already_passed_stops_before_searching() -> None:
    """A node asked after the deadline fails at once, having searched nothing."""
    allocator = Allocator(classes=CLASSES, slices=_slices(8), deadline=time.monotonic() - 1)
    with pytest.raises(AllocationTimeout) as caught:
        allocator.allocate(NODE, [_pathological_claim()])
    assert caught.value.steps == 0


def test_budget_does_not_change_an_answer() -> None:
    """With a generous budget the result is the one found without a budget."""
    claim = {
        "metadata": {"name": "two"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "gpu",
                            "allocationMode": "ExactCount",
                            "count": 2,
                        },
                    }
                ]
            }
        },
    }
    plain = Allocator(classes=CLASSES, slices=_slices(4))
    bounded = Allocator(
        classes=CLASSES, slices=_slices(4), deadline=time.monotonic() + 60, cancelled=lambda: False
    )
    results = bounded.allocate(NODE, [claim])
    assert results is not None
    assert [r["device"] for r in results[0]["devices"]["results"]] == ["gpu-0000", "gpu-0001"]
    assert results == plain.allocate(NODE, [claim])


def test_deep_search_leaves_the_recursion_limit_alone() -> None:
    """Hundreds of claims search deeper than the recursion limit without touching it."""
    limit = sys.getrecursionlimit()
    num_claims, per_claim = 300, 4
    # One search level per device, request and claim: deeper than the limit in force.
    assert num_claims * (per_claim + 2) > limit
    claims = [
        {
            "metadata": {"name": f"claim-{c}"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "r",
                            "exactly": {
                                "deviceClassName": "gpu",
                                "allocationMode": "ExactCount",
                                "count": per_claim,
                            },
                        }
                    ]
                }
            },
        }
        for c in range(num_claims)
    ]
    allocator = Allocator(classes=CLASSES, slices=_slices(num_claims * per_claim))
    results = allocator.allocate(NODE, claims)
    assert sys.getrecursionlimit() == limit
    assert results is not None
    # First fit: claim c gets the next four devices in slice order.
    for c, result in enumerate(results):
        devices = [r["device"] for r in result["devices"]["results"]]
        assert devices == [f"gpu-{i:04d}" for i in range(c * per_claim, (c + 1) * per_claim)]


def test_cli_timeout_reports_giving_up(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--timeout` turns a runaway scenario into an error output that says it gave up."""
    scenario = {
        "node": NODE,
        "classes": CLASSES,
        "slices": _slices(8),
        "claims": [_pathological_claim()],
    }
    # 0.3 s at 0.1 s a reading: the deadline, the search's start and three checks.
    ticking = clock.install(monkeypatch, budget, cli, tick=0.1)
    status = main(["--timeout", "0.3"], stdin=io.StringIO(json.dumps(scenario)))
    assert ticking.readings <= 5
    assert status == 0
    output = json.loads(capsys.readouterr().out)
    assert output["results"] is None
    assert "gave up after" in output["error"]
