"""Preemption where devices are held: which victims free which devices, and how many
candidates the search holds before it stops (as the scheduler's DefaultPreemption)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from claims.whatif.nodefit import NodeUsage, PodDemand
from claims.whatif.preemption import (
    PreemptionInputs,
    RunningPod,
    candidates_wanted,
    preempt,
)
from claims.whatif.service import what_if
from tests.claims.whatif.preemption_objects import (
    HIGH,
    LOW,
    MEDIUM,
    SMALL,
    VERY_LARGE,
    ask,
    asking,
    cluster,
    running,
)

DRIVER = "gpu.example.com"


def gpu_objects() -> list[dict[str, Any]]:
    """machine1 publishes two GPUs, both allocated: gpu-0 to a claim only `solo` holds, gpu-1
    to a claim `shared-low` and the higher-priority `shared-high` both hold."""
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu", "uid": "uid-class"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "machine1-gpus", "uid": "uid-slice"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "machine1",
            "pool": {"name": "machine1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
        },
    }

    def claim(name: str, device: str, holders: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-claim-{name}"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": DRIVER,
                                "pool": "machine1",
                                "device": device,
                            }
                        ]
                    }
                },
                "reservedFor": [
                    {"resource": "pods", "name": h, "uid": f"uid-pod-{h}"} for h in holders
                ],
            },
        }

    def user(name: str, priority: int, claim_name: str) -> dict[str, Any]:
        return running(
            name,
            "machine1",
            SMALL,
            priority,
            resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}],
        )

    return [
        device_class,
        slice_,
        claim("solo-gpu", "gpu-0", ["solo"]),
        claim("shared-gpu", "gpu-1", ["shared-low", "shared-high"]),
        user("solo", LOW, "solo-gpu"),
        user("shared-low", LOW, "shared-gpu"),
        user("shared-high", HIGH, "shared-gpu"),
    ]


@pytest.mark.django_db
def test_victims_free_the_devices_no_one_else_holds() -> None:
    """A victim's claim frees its devices only when no other consumer is left (the claim is
    deallocated once reservedFor is empty): `solo` frees gpu-0; gpu-1 stays with shared-high."""
    cluster(1, [running("filler", "machine1", MEDIUM, LOW)], *gpu_objects())
    answer = ask(asking(VERY_LARGE - 1))
    victims = {v["name"]: v for v in answer["preemption"]["victims"]}
    assert set(victims) == {"solo", "shared-low", "filler"}
    assert victims["solo"]["claims"] == ["team/solo-gpu"]
    assert victims["solo"]["devicesFreed"] == [f"{DRIVER}/machine1/gpu-0"]
    assert victims["shared-low"]["devicesFreed"] == []


@pytest.mark.django_db
def test_devices_held_by_lower_priority_pods_do_not_make_a_candidate() -> None:
    """DynamicResources has no PreFilter extensions: in the scheduler's dry run a victim's
    devices are not free, so a pod short only of devices finds no candidate."""
    cluster(1, [], *gpu_objects())
    wants_gpu = asking(SMALL)
    wants_gpu["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one", "namespace": "team"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
            }
        },
    }
    answer = what_if(yaml.safe_dump_all([template, wants_gpu]), use_cache=False, preemption=True)
    assert answer["fits"] is False
    assert answer["preemption"]["node"] is None
    assert answer["preemption"]["candidates"] == 0
    assert "devices never count as free" in answer["preemption"]["message"]


def test_candidates_wanted_as_calculate_num_candidates() -> None:
    """10% of the nodes, at least 100, never more than there are."""
    assert [candidates_wanted(n) for n in (5000, 1200, 300, 40)] == [500, 120, 100, 40]


def test_the_search_stops_once_enough_candidates_are_held() -> None:
    """On 1,000 full nodes each with one low-priority pod, 100 candidates are enough: the pods
    of only the first 200 nodes (one read) are asked for, not all 1,000."""
    names = [f"n-{i:04d}" for i in range(1000)]
    nodes = [
        {"metadata": {"name": n}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}}
        for n in names
    ]
    entries = [
        {"node": n, "fits": True, "filter": {"filter": "NodeResourcesFit", "reason": "x"}}
        for n in names
    ]
    asked: list[str] = []

    def running(wanted: Any, below: int) -> dict[str, list[RunningPod]]:
        asked.extend(wanted)
        return {
            n: [RunningPod("ns", f"p-{n}", f"u-{n}", 0, PodDemand(requests={"cpu": 1000}))]
            for n in wanted
        }

    inputs = PreemptionInputs(classes=[], budgets=[], running=running, claims=lambda refs: {})
    usage = {n: NodeUsage({"cpu": 1000}, 1) for n in names}
    answer = preempt(
        nodes,
        entries,
        PodDemand(requests={"cpu": 500}),
        spec={"priority": 0, "priorityClassName": "system-cluster-critical"},
        inputs=inputs,
        usage=usage,
    )
    # spec.priority 0 differs from the class's value: admission refuses, nothing is read.
    assert asked == [] and "must not be provided" in answer["message"]
    answer = preempt(
        nodes,
        entries,
        PodDemand(requests={"cpu": 500}),
        spec={"priorityClassName": "system-cluster-critical"},
        inputs=inputs,
        usage=usage,
    )
    assert len(asked) == 200
    assert answer["candidates"] == 100 and answer["node"] == "n-0000"
