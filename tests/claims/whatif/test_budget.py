"""A what-if that would search for minutes ends within its time budget with a partial answer."""

from __future__ import annotations

import pytest
import yaml

from claims.whatif import simulation
from claims.whatif.service import what_if
from dralib.allocator import budget
from tests import clock
from tests.claims.whatif.conftest import load_objects

DRIVER = "gpu.example.com"


def hostile_cluster(nodes: int = 3) -> list[dict]:
    """Nodes with 8 identical GPUs each: room for a search with no way out."""
    objects: list[dict] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu", "uid": "class-gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    ]
    for index in range(nodes):
        name = f"node-{index}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}", "labels": {}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus", "uid": f"slice-{name}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"gpu-{d}", "attributes": {"index": {"int": d}}} for d in range(8)
                    ],
                },
            }
        )
    return objects


def exponential_claim() -> str:
    """9 requests with 2 one-device alternatives each over 8 devices: no solution, and the
    search tries every way of giving 8 of the requests a device first."""
    requests = [
        {
            "name": f"r{i}",
            "firstAvailable": [
                {"name": "a", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
                {"name": "b", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
            ],
        }
        for i in range(9)
    ]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "hostile", "namespace": "default"},
        "spec": {"devices": {"requests": requests}},
    }
    return yaml.safe_dump(claim)


@pytest.mark.django_db
def test_an_exponential_search_stops_at_the_budget_with_a_partial_answer(monkeypatch) -> None:
    """The search gives up at the budget, says so, and the nodes left are not evaluated."""
    load_objects(hostile_cluster())
    # A tenth of a second per clock reading: the search checks the clock every CHECK_EVERY
    # steps, so a 1 s budget is ten readings, whatever the machine's speed or load.
    ticking = clock.install(monkeypatch, budget, simulation, tick=0.1)
    answer = what_if(exponential_claim(), budget=1, use_cache=False)
    # The deadline's own reading, the ten of the budget, and each node's start: not one search
    # check past the budget.
    assert ticking.readings <= 1 + 10 + 3
    assert answer["fits"] is False
    assert answer["gaveUp"]["budgetSeconds"] == 1
    assert "gave up after 1 s" in answer["gaveUp"]["message"]
    assert any("not evaluated" in str(node) for node in answer["nodes"])


@pytest.mark.django_db
def test_a_partial_answer_is_not_cached(monkeypatch) -> None:
    """Asking again searches again instead of serving a timing-dependent answer."""
    load_objects(hostile_cluster(nodes=1))
    clock.install(monkeypatch, budget, simulation, tick=0.1)
    first = what_if(exponential_claim(), budget=1)
    second = what_if(exponential_claim(), budget=1)
    assert "gaveUp" in first and second["cached"] is False


@pytest.mark.django_db
def test_an_ordinary_question_is_answered_whole_within_its_budget() -> None:
    """A question that fits quickly carries no gaveUp."""
    load_objects(hostile_cluster(nodes=2))
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    answer = what_if(yaml.safe_dump(claim), budget=5, use_cache=False)
    assert answer["fits"] is True and "gaveUp" not in answer
