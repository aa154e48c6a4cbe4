"""What-if `add-nodes` from a pasted node shape: how many claims fit on nodes that do not exist
yet, with GPU nodes in the form NVIDIA's DRA driver publishes them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import factories as f
from tests.claims.whatif.helpers import URL, claim_yaml

NVIDIA = "gpu.nvidia.com"
GPUS_PER_NODE = 8


def _gpu(index: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "architecture": {"string": "Hopper"},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "570.124.6"},
            "index": {"int": index},
            "minor": {"int": index},
            "uuid": {"string": f"GPU-{{node}}-{index}"},
        },
        "capacity": {"memory": {"value": "81559Mi"}},
    }


def gpu_shape() -> dict[str, Any]:
    """One p5.48xlarge-like node: its labels and the slice the GPU driver would publish."""
    return {
        "node": {
            "metadata": {
                "labels": {
                    "node.kubernetes.io/instance-type": "p5.48xlarge",
                    "nvidia.com/gpu.present": "true",
                    "topology.kubernetes.io/zone": "us-east-1a",
                }
            }
        },
        "slices": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "{node}-gpu.nvidia.com-abcde"},
                "spec": {
                    "driver": NVIDIA,
                    "nodeName": "{node}",
                    "pool": {"name": "{node}", "generation": 1, "resourceSliceCount": 1},
                    "devices": [_gpu(i) for i in range(GPUS_PER_NODE)],
                },
            }
        ],
    }


@pytest.fixture
def gpu_class(demo) -> None:
    """The demo cluster plus NVIDIA's DeviceClass; no node has NVIDIA GPUs yet."""
    f.create(f.device_class_object("gpu.nvidia.com", expression=f'device.driver == "{NVIDIA}"'))


def _ask(api, *, count: int = 1, assume: list[dict[str, Any]] | None = None, **claim) -> Any:
    body = {
        "yaml": claim_yaml(device_class="gpu.nvidia.com", count=count, **claim),
        "count": "max",
        "assume": assume or [],
    }
    return api.post(URL, body, format="json")


def test_added_gpu_nodes_take_as_many_claims_as_they_have_gpus(gpu_class, api) -> None:
    """None fit today; four added 8-GPU nodes take 32 one-GPU claims, or 16 two-GPU claims."""
    assert _ask(api).json()["headroom"]["placed"] == 0
    assume = [{"op": "add-nodes", "count": 4, "shape": gpu_shape()}]
    answer = _ask(api, assume=assume).json()
    assert answer["headroom"]["placed"] == 4 * GPUS_PER_NODE
    assert answer["assumed"] == ["4 node(s) of the given shape added (whatif-node-1, ...)"]
    fitting = {n["node"] for n in answer["nodes"] if n["fits"]}
    assert fitting == {f"whatif-node-{i}" for i in range(1, 5)}
    pairs = _ask(api, count=2, assume=assume).json()
    assert pairs["headroom"]["placed"] == 4 * GPUS_PER_NODE // 2


def test_shape_devices_and_labels_carry_the_node_name(gpu_class, api) -> None:
    """Placeholders become the added node's name: pool, nodeName, attributes and labels."""
    assume = [{"op": "add-nodes", "count": 2, "shape": gpu_shape(), "namePrefix": "p5"}]
    answer = _ask(
        api,
        assume=assume,
        selector=f'device.attributes["{NVIDIA}"].uuid == "GPU-p5-2-3"',
    ).json()
    fitting = [n for n in answer["nodes"] if n["fits"]]
    assert [n["node"] for n in fitting] == ["p5-2"]
    device = fitting[0]["claims"][0]["devices"][0]
    assert (device["driver"], device["pool"], device["device"]) == (NVIDIA, "p5-2", "gpu-3")
    zone = api.post(
        URL,
        {
            "yaml": claim_yaml(device_class="gpu.nvidia.com", count=1),
            "nodeSelector": "node.kubernetes.io/instance-type=p5.48xlarge",
            "assume": assume,
        },
        format="json",
    ).json()
    assert {n["node"] for n in zone["nodes"]} == {"p5-1", "p5-2"}


def test_v1beta1_slice_shape_is_accepted(gpu_class, api) -> None:
    """A slice pasted as a 1.32 driver publishes it (v1beta1, basic devices) works the same."""
    shape = gpu_shape()
    beta = shape["slices"][0]
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    beta["spec"]["devices"] = [
        {"name": d["name"], "basic": {"attributes": d["attributes"], "capacity": d["capacity"]}}
        for d in beta["spec"]["devices"]
    ]
    answer = _ask(api, assume=[{"op": "add-nodes", "count": 3, "shape": shape}]).json()
    assert answer["headroom"]["placed"] == 3 * GPUS_PER_NODE


def test_like_still_copies_an_existing_node(gpu_class, api) -> None:
    """`like` keeps its meaning beside `shape`, and the names of both never collide."""
    assume = [
        {"op": "add-nodes", "count": 1, "shape": gpu_shape()},
        {"op": "add-nodes", "like": "node-0001", "count": 1},
        {"op": "add-nodes", "count": 1, "shape": gpu_shape()},
    ]
    answer = _ask(api, assume=assume).json()
    # The copy of a demo node brings no NVIDIA GPU; the two shaped nodes bring 8 each.
    assert answer["headroom"]["placed"] == 2 * GPUS_PER_NODE
    names = {n["node"] for n in answer["nodes"]}
    assert {"whatif-node-1", "whatif-node-2", "node-0001-clone-1"} <= names


def _bad(shape_change: dict[str, Any]) -> dict[str, Any]:
    return {"op": "add-nodes", "count": 1, **shape_change}


@pytest.mark.parametrize(
    ("assume", "field"),
    [
        (
            [
                _bad({"shape": gpu_shape(), "count": 600}),
                _bad({"shape": gpu_shape(), "count": 401}),
            ],
            "assume[1].count",
        ),
        ([_bad({"shape": gpu_shape(), "count": 1001})], "assume[0].count"),
        ([_bad({"shape": gpu_shape(), "like": "node-0001"})], "assume[0]"),
        ([_bad({"shape": {"slices": []}})], "assume[0].shape.slices"),
        ([_bad({"shape": gpu_shape(), "namePrefix": "Bad_Name"})], "assume[0].namePrefix"),
    ],
)
def test_bad_shapes_and_too_many_nodes_are_400(gpu_class, api, assume, field) -> None:
    """More than 1,000 added nodes in all, or a malformed shape, is a 400 naming the field."""
    response = _ask(api, assume=assume)
    assert response.status_code == 400, response.content
    assert field in str(response.json())


def test_pool_name_must_carry_the_placeholder(gpu_class, api) -> None:
    """A pool without {node} would be one pool shared by every added node: refused."""
    shape = gpu_shape()
    shape["slices"][0]["spec"]["pool"]["name"] = "node-a"
    response = _ask(api, assume=[_bad({"shape": shape})])
    assert response.status_code == 400
    assert "assume[0].shape.slices[0].spec.pool.name" in str(response.json())
    broken = copy.deepcopy(gpu_shape())
    broken["slices"][0]["spec"]["devices"][0]["capacity"]["memory"] = {"value": "lots"}
    response = _ask(api, assume=[_bad({"shape": broken})])
    assert response.status_code == 400
    assert "assume[0].shape.slices[0]" in str(response.json())
