"""Test factories: build Kubernetes objects as the API server sends them and store them.

Objects go through the real write path (`inventory.sync.upsert_events`, which normalizes them),
so tests see the rows the watcher would have written.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from inventory.choices import Kind
from inventory.sync import upsert_events

JSON = dict[str, Any]
RESOURCE_V1 = "resource.k8s.io/v1"
_versions = itertools.count(1000)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> JSON:
    meta: JSON = {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": str(next(_versions))}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def store(kind: str, *objects: JSON) -> list[JSON]:
    """Write raw objects of one kind through the sync path; fails loudly if any is skipped."""
    result = upsert_events(kind, [(obj, None) for obj in objects], publish=False)
    assert not result.skipped, result.skipped
    return list(objects)


def node_object(name: str, *, ready: bool = True, labels: Mapping[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, labels={"kubernetes.io/hostname": name, **(labels or {})}),
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def device_class_object(name: str, *, expression: str | None = None) -> JSON:
    spec: JSON = {}
    if expression is not None:
        spec["selectors"] = [{"cel": {"expression": expression}}]
    return {"apiVersion": RESOURCE_V1, "kind": "DeviceClass", "metadata": _meta(name), "spec": spec}


def device_entry(
    name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    capacity: Mapping[str, str] | None = None,
    taints: Iterable[JSON] = (),
    consumes: Mapping[str, Mapping[str, str]] | None = None,
    allow_multiple: bool = False,
) -> JSON:
    """One device of a slice; attributes as v1 typed values, capacity as name -> quantity."""
    device: JSON = {"name": name}
    if attributes:
        device["attributes"] = dict(attributes)
    if capacity:
        device["capacity"] = {key: {"value": value} for key, value in capacity.items()}
    if taints:
        device["taints"] = list(taints)
    if consumes:
        device["consumesCounters"] = [
            {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}
            for counter_set, counters in consumes.items()
        ]
    if allow_multiple:
        device["allowMultipleAllocations"] = True
    return device


def slice_object(
    name: str,
    *,
    driver: str,
    pool: str,
    node: str | None = None,
    devices: Iterable[JSON] = (),
    generation: int = 1,
    slice_count: int = 1,
    counters: Mapping[str, Mapping[str, str]] | None = None,
) -> JSON:
    spec: JSON = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slice_count},
        "devices": list(devices),
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    if counters:
        spec["sharedCounters"] = [
            {"name": set_name, "counters": {k: {"value": v} for k, v in values.items()}}
            for set_name, values in counters.items()
        ]
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceSlice",
        "metadata": _meta(name),
        "spec": spec,
    }


def gpu_slice(
    name: str, *, driver: str = "gpu.example.com", node: str = "node-a", count: int = 2, **kw: Any
) -> JSON:
    """A node-local slice of `count` GPUs named gpu-0.. with model h100 and 80Gi memory."""
    devices = [
        device_entry(
            f"gpu-{i}",
            attributes={"model": {"string": "h100"}, "index": {"int": i}},
            capacity={"memory": "80Gi"},
        )
        for i in range(count)
    ]
    return slice_object(
        name, driver=driver, pool=kw.pop("pool", node), node=node, devices=devices, **kw
    )


def mig_gpu_slices(node: str, *, driver: str = "gpu.example.com", slices: int = 7) -> list[JSON]:
    """One MIG GPU in pool `node`, in v1's two slices (a slice holds devices or sharedCounters,
    never both): the counter set gpu-0-counters (80Gi, 7 slices), the whole GPU gpu-0 that takes
    it all and `slices` 1g slices gpu-0-mig-N taking a seventh each; `type` is gpu or mig."""
    counters = "gpu-0-counters"
    whole = {"memory": "80Gi", "slices": "7"}
    devices = [
        device_entry("gpu-0", attributes={"type": {"string": "gpu"}}, consumes={counters: whole}),
        *(
            device_entry(
                f"gpu-0-mig-{slot}",
                attributes={"type": {"string": "mig"}},
                consumes={counters: {"memory": "10Gi", "slices": "1"}},
            )
            for slot in range(slices)
        ),
    ]
    return [
        slice_object(
            f"{node}-counters",
            driver=driver,
            pool=node,
            node=node,
            slice_count=2,
            counters={counters: whole},
        ),
        slice_object(
            f"{node}-gpu", driver=driver, pool=node, node=node, slice_count=2, devices=devices
        ),
    ]


def allocation_result(
    request: str,
    *,
    driver: str,
    pool: str,
    device: str,
    admin_access: bool = False,
    share_id: str | None = None,
    consumed: Mapping[str, str] | None = None,
) -> JSON:
    entry: JSON = {"request": request, "driver": driver, "pool": pool, "device": device}
    if admin_access:
        entry["adminAccess"] = True
    if share_id:
        entry["shareID"] = share_id
    if consumed:
        entry["consumedCapacity"] = dict(consumed)
    return entry


def claim_object(
    name: str,
    *,
    namespace: str = "team-a",
    device_class: str = "gpu.example.com",
    count: int = 1,
    results: Iterable[JSON] = (),
    node: str | None = None,
    reserved_for: Iterable[str] = (),
) -> JSON:
    obj: JSON = {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": _meta(name, namespace),
        "spec": {
            "devices": {
                "requests": [
                    {"name": "req", "exactly": {"deviceClassName": device_class, "count": count}}
                ]
            }
        },
    }
    results = list(results)
    if results:
        allocation: JSON = {"devices": {"results": results}}
        if node:
            allocation["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        status: JSON = {"allocation": allocation}
        if reserved_for:
            status["reservedFor"] = [
                {"resource": "pods", "name": pod, "uid": str(uuid.uuid4())} for pod in reserved_for
            ]
        obj["status"] = status
    return obj


def template_object(name: str, *, namespace: str = "team-a", device_class: str = "gpu") -> JSON:
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(name, namespace),
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "req", "exactly": {"deviceClassName": device_class}}]
                }
            }
        },
    }


def pod_object(
    name: str,
    *,
    namespace: str = "team-a",
    claim: str = "c",
    node: str = "",
    phase: str = "Running",
) -> JSON:
    spec: JSON = {
        "resourceClaims": [{"name": "dev", "resourceClaimName": claim}],
        "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "dev"}]}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, namespace),
        "spec": spec,
        "status": {"phase": phase},
    }


def quota_object(name: str, *, namespace: str = "team-a", hard: Mapping[str, str]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _meta(name, namespace),
        "spec": {"hard": dict(hard)},
        "status": {"hard": dict(hard), "used": dict.fromkeys(hard, "0")},
    }


def taint_rule_object(
    name: str, *, driver: str = "", pool: str = "", device: str = "", effect: str = "NoSchedule"
) -> JSON:
    selector = {k: v for k, v in {"driver": driver, "pool": pool, "device": device}.items() if v}
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": _meta(name),
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/maintenance", "value": "true", "effect": effect},
        },
    }


def resource_class_object(name: str, *, driver: str) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceClass",
        "metadata": _meta(name),
        "driverName": driver,
    }


def scheduling_context_object(name: str, *, namespace: str = "team-a", node: str = "") -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "PodSchedulingContext",
        "metadata": _meta(name, namespace),
        "spec": {"selectedNode": node, "potentialNodes": [node] if node else []},
    }


KINDS: dict[str, str] = {
    "Node": Kind.NODE,
    "DeviceClass": Kind.DEVICE_CLASS,
    "ResourceSlice": Kind.RESOURCE_SLICE,
    "ResourceClaim": Kind.RESOURCE_CLAIM,
    "ResourceClaimTemplate": Kind.RESOURCE_CLAIM_TEMPLATE,
    "Pod": Kind.POD,
    "ResourceQuota": Kind.RESOURCE_QUOTA,
    "DeviceTaintRule": Kind.DEVICE_TAINT_RULE,
    "ResourceClass": Kind.RESOURCE_CLASS,
    "PodSchedulingContext": Kind.POD_SCHEDULING_CONTEXT,
}


def create(*objects: JSON) -> list[JSON]:
    """Store objects of any kinds (each through its own kind's sync handler), in order."""
    for obj in objects:
        store(KINDS[obj["kind"]], obj)
    return list(objects)
