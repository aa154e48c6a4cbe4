"""Shareable devices (consumable capacity) in what-if: the class selector that picks them and the
consumed amounts as the cluster will show them."""

from __future__ import annotations

from typing import Any

import yaml

from claims.whatif.service import what_if
from dralib.allocator import Allocator, NodeInfo
from tests.claims.whatif.conftest import load_objects

DRIVER = "nic.example.com"
# A class for shareable devices, as drivers publish them (upstream's own selector field).
SHARED_CLASS = "shared-nic"


def cluster() -> list[dict[str, Any]]:
    """One node with one shareable NIC whose bandwidth is handed out in steps of 1G."""
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": SHARED_CLASS, "uid": "uid-class-shared"},
        "spec": {
            "selectors": [
                {"cel": {"expression": f'device.driver == "{DRIVER}"'}},
                {"cel": {"expression": "device.allowMultipleAllocations"}},
            ]
        },
    }
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-a", "uid": "uid-node-a", "labels": {}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    bandwidth = {
        "value": "80G",
        "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}},
    }
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-nics", "uid": "uid-slice-node-a"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "nic-0",
                    "allowMultipleAllocations": True,
                    "capacity": {"bandwidth": bandwidth},
                }
            ],
        },
    }
    return [device_class, node, slice_]


def claim(bandwidth: str) -> dict[str, Any]:
    request = {
        "deviceClassName": SHARED_CLASS,
        "allocationMode": "ExactCount",
        "count": 1,
        "capacity": {"requests": {"bandwidth": bandwidth}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "share", "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": request}]}},
    }


def test_the_allocator_writes_what_the_scheduler_sends() -> None:
    """The allocator's own result keeps the scheduler's in-memory text, which the conformance
    expectations (the Go allocator's output before any API round trip) are written in."""
    objects = cluster()
    allocator = Allocator(classes=[objects[0]], slices=[objects[2]])
    results = allocator.allocate(NodeInfo.from_object(objects[1]), [claim("4.5G")])
    assert results is not None
    consumed = results[0]["devices"]["results"][0]["consumedCapacity"]
    # 4.5G rounded up to the policy's step: NewQuantity(5e9, BinarySI), printed without suffix.
    assert consumed == {"bandwidth": "5000000000"}


def test_consumed_capacity_is_shown_as_the_api_server_stores_it(db) -> None:
    """The answer's consumedCapacity is the canonical form the cluster will show ("5G")."""
    load_objects(cluster())
    answer = what_if(yaml.safe_dump(claim("4.5G")), use_cache=False)
    assert answer["fits"] is True
    devices = answer["placements"][0]["devices"]
    assert [d["consumedCapacity"] for d in devices] == [{"bandwidth": "5G"}]
    assert [d["consumedCapacity"] for d in answer["pods"][0]["claims"][0]["devices"]] == [
        {"bandwidth": "5G"}
    ]


def test_shareable_class_selects_with_consumable_capacity_off(db) -> None:
    """A class reading device.allowMultipleAllocations compiles with the feature off, as in
    the scheduler's CEL environment (StoredExpressions): the device is allocated whole."""
    load_objects(cluster())
    plain = claim("1G")
    del plain["spec"]["devices"]["requests"][0]["exactly"]["capacity"]
    answer = what_if(yaml.safe_dump(plain), features={"ConsumableCapacity": False}, use_cache=False)
    assert answer["fits"] is True, answer["reasons"]
    (device,) = answer["placements"][0]["devices"]
    assert device["device"] == "nic-0"
    assert "shareID" not in device and "consumedCapacity" not in device
