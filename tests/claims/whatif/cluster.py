"""A small cluster for pod-placement tests: four nodes of two GPUs each, differently constrained.

- node-a: label `pool: a`
- node-b: label `pool: b`
- node-c: taint `dedicated=ml:NoSchedule`
- node-d: cordoned (`spec.unschedulable`)

Each node publishes one pool (named after the node) of gpu.example.com devices gpu-0 and gpu-1.
The class gpu.example.com carries an opaque config and `extendedResourceName: example.com/gpu`.
"""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"
NODES = ("node-a", "node-b", "node-c", "node-d")
GPUS_PER_NODE = 2
CLASS_CONFIG = [
    {
        "opaque": {
            "driver": DRIVER,
            "parameters": {"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig"},
        }
    }
]


def _node(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    labels = {"kubernetes.io/hostname": name}
    if name == "node-a":
        labels["pool"] = "a"
    if name == "node-b":
        labels["pool"] = "b"
    if name == "node-c":
        spec["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    if name == "node-d":
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus", "uid": f"uid-slice-{node}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
                for i in range(GPUS_PER_NODE)
            ],
        },
    }


def objects() -> list[dict[str, Any]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER, "uid": "uid-class-gpu"},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "config": CLASS_CONFIG,
            "extendedResourceName": "example.com/gpu",
        },
    }
    return [device_class, *(_node(n) for n in NODES), *(_slice(n) for n in NODES)]


def schedulable_for(tolerates_dedicated: bool = False) -> list[str]:
    """Nodes a plain pod may use, in name order."""
    return [n for n in NODES if n != "node-d" and (tolerates_dedicated or n != "node-c")]
