"""`assume` is bounded in total, and so is what kept simulations with assumptions hold."""

from __future__ import annotations

import copy

import pytest
import yaml

from claims.whatif import service, state
from claims.whatif.inputs import WhatIfError
from claims.whatif.options import MAX_ADDED_DEVICES, MAX_ADDED_NODES, parse_assume
from claims.whatif.service import kept_simulations, what_if
from claims.whatif.simulation import Simulation
from dralib.allocator.limits import RESOURCE_SLICE_MAX_DEVICES
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_add_node_shape import _gpu, gpu_shape
from tests.claims.whatif.test_budget import hostile_cluster

ONE_GPU = yaml.safe_dump(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
)
GPUS = 8  # per node of hostile_cluster


def full_shape() -> dict:
    """A node type whose one slice carries as many devices as a slice may."""
    shape = copy.deepcopy(gpu_shape())
    shape["slices"][0]["spec"]["devices"] = [_gpu(i) for i in range(RESOURCE_SLICE_MAX_DEVICES)]
    return shape


def big_node_cluster() -> list[dict]:
    """hostile_cluster plus one node whose slice is full."""
    objects = hostile_cluster(nodes=1)
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "big", "uid": "uid-big", "labels": {}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    devices = [{"name": f"gpu-{d}"} for d in range(RESOURCE_SLICE_MAX_DEVICES)]
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "big-gpus", "uid": "slice-big"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "big",
                "pool": {"name": "big", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )
    return objects


def test_added_nodes_are_bounded_in_total() -> None:
    """Several add-nodes changes together may not pass MAX_ADDED_NODES."""
    half = MAX_ADDED_NODES // 2 + 1
    assume = [{"op": "add-nodes", "like": "a", "count": half}] * 2
    with pytest.raises(WhatIfError) as error:
        parse_assume(assume)
    assert error.value.field == "assume[1].count"


def test_shaped_devices_are_bounded_in_total_when_parsed() -> None:
    """Nodes of a shape bringing more than MAX_ADDED_DEVICES devices are refused at once."""
    per_node = RESOURCE_SLICE_MAX_DEVICES
    fitting = MAX_ADDED_DEVICES // per_node
    assert parse_assume([{"op": "add-nodes", "shape": full_shape(), "count": fitting}])
    assume = [
        {"op": "add-nodes", "shape": full_shape(), "count": fitting // 2},
        {"op": "add-nodes", "shape": full_shape(), "count": fitting - fitting // 2 + 1},
    ]
    with pytest.raises(WhatIfError) as error:
        parse_assume(assume)
    assert error.value.field == "assume[1].count"
    assert f"at most {MAX_ADDED_DEVICES:,}" in error.value.message


@pytest.mark.django_db
def test_copied_devices_are_bounded_in_total(api) -> None:
    """Copies of an existing node count its devices: past MAX_ADDED_DEVICES a 400."""
    load_objects(big_node_cluster())
    fitting = MAX_ADDED_DEVICES // RESOURCE_SLICE_MAX_DEVICES
    ok = api.post(
        "/api/claims/what-if/",
        {"yaml": ONE_GPU, "assume": [{"op": "add-nodes", "like": "big", "count": fitting}]},
        format="json",
    )
    assert ok.status_code == 200, ok.content
    too_many = [
        {"op": "add-nodes", "like": "node-0", "count": 10},
        {"op": "add-nodes", "like": "big", "count": fitting},
    ]
    refused = api.post("/api/claims/what-if/", {"yaml": ONE_GPU, "assume": too_many}, format="json")
    assert refused.status_code == 400
    assert refused.json()["field"] == "assume[1].count"


@pytest.mark.django_db
def test_kept_simulations_are_bounded_by_the_devices_they_added(monkeypatch) -> None:
    """Past the device bound the oldest are dropped, an oversized one is not kept, and the
    shared slice cache holds parsed slices of kept simulations only."""
    monkeypatch.setattr(service._simulations, "max_devices", 2500)
    load_objects(hostile_cluster(nodes=3))
    for count in (100, 110, 120):  # 800, 880 and 960 devices
        what_if(ONE_GPU, assume=[{"op": "add-nodes", "like": "node-0", "count": count}])
    assert kept_simulations() == (2, (110 + 120) * GPUS)
    assert len(state._slice_cache) == 3 + 110 + 120
    what_if(ONE_GPU, assume=[{"op": "add-nodes", "like": "node-1", "count": 400}])
    assert kept_simulations() == (2, (110 + 120) * GPUS)
    assert len(state._slice_cache) == 3 + 110 + 120


@pytest.mark.django_db
def test_a_kept_simulation_is_reused(monkeypatch) -> None:
    """The same question with the same assumptions reuses the kept simulation."""
    load_objects(hostile_cluster(nodes=3))
    built: list[object] = []

    def counted(*args, **kwargs):
        built.append(Simulation(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(service, "Simulation", counted)
    assume = [{"op": "add-nodes", "like": "node-0", "count": 5}]
    what_if(ONE_GPU, assume=assume, use_cache=False)
    what_if(ONE_GPU, assume=assume, use_cache=False)
    assert len(built) == 1 and kept_simulations() == (1, 5 * GPUS)
