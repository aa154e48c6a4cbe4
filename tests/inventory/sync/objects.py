"""Small v1 objects for sync tests, built the way an API server would store them."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]
DRA = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def node(name: str, *, ready: bool = True) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def namespace(name: str, *, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def device_class(name: str) -> JSON:
    expression = f'device.driver == "{DRIVER}"'
    return {
        "apiVersion": DRA,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def resource_slice(name: str, *, node_name: str, devices: int = 2, generation: int = 1) -> JSON:
    return {
        "apiVersion": DRA,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"index": {"int": i}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def resource_claim(namespace: str, name: str, *, device_class_name: str = "gpu") -> JSON:
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name}}]
            }
        },
    }


def pod(namespace: str, name: str, *, claim: str | None) -> JSON:
    spec: JSON = {"containers": [{"name": "main", "image": "busybox"}]}
    if claim is not None:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        spec["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def broken_slice(name: str, *, node_name: str) -> JSON:
    """A ResourceSlice whose devices field is a string: the normalizer must reject it."""
    obj = resource_slice(name, node_name=node_name)
    obj["spec"]["devices"] = "not-a-list"
    return obj
