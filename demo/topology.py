"""Nodes and the ResourceSlices their drivers publish.

Shapes follow resource.k8s.io/v1: a slice holds either devices or sharedCounters, never both, so
a MIG-capable node publishes a two-slice pool (one slice of counter sets, one of devices). A
device that consumes counters limits its slice to 64 devices: 8 GPUs and 7 partitions each fit
exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from demo.catalog import (
    FABRIC_DRIVER,
    GPU_DRIVER,
    GPU_PRODUCT_LABEL,
    NIC_DRIVER,
    POOL_LABEL,
    RESOURCE_API,
    ZONE_LABEL,
    metadata,
    new_uid,
    random_suffix,
)

GPUS_PER_NODE = 8
MIG_PER_GPU = 7
MIG_INFIX = "-mig-"
# Semantic versions: no leading zeros, as the API server requires of version attributes.
DRIVER_VERSIONS = ("550.54.15", "550.90.7", "535.161.8")


@dataclass(frozen=True, slots=True)
class NodeKind:
    """What a node pool's machines carry."""

    pool: str
    model: str | None
    product: str | None
    memory_gi: int
    multiprocessors: int
    mig: bool


NODE_KINDS = {
    "h100-mig": NodeKind("gpu-h100-mig", "h100", "NVIDIA-H100-80GB-HBM3", 80, 132, True),
    "h100": NodeKind("gpu-h100", "h100", "NVIDIA-H100-80GB-HBM3", 80, 132, False),
    "a100": NodeKind("gpu-a100", "a100", "NVIDIA-A100-SXM4-40GB", 40, 108, False),
    "cpu": NodeKind("cpu", None, None, 0, 0, False),
}
# Out of every ten nodes: 2 MIG-partitioned H100, 3 H100, 4 A100, 1 CPU-only.
KIND_PATTERN = (
    "h100-mig",
    "h100-mig",
    "h100",
    "h100",
    "h100",
    "a100",
    "a100",
    "a100",
    "a100",
    "cpu",
)


def node_name(index: int) -> str:
    return f"node-{index:04d}"


def parent_gpu(device: str) -> str:
    """The whole GPU a device of a node's GPU pool is or is part of (`gpu-3-mig-...` -> `gpu-3`)."""
    return device.partition(MIG_INFIX)[0]


def node_object(
    *, name: str, kind: NodeKind, zone: str, ready: bool, uid: str, created: str, now: str
) -> dict[str, Any]:
    """A core/v1 Node with the labels, capacity and conditions a GPU cluster shows."""
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        ZONE_LABEL: zone,
        "topology.kubernetes.io/region": "region-1",
        POOL_LABEL: kind.pool,
        "node.kubernetes.io/instance-type": "gpu-8x" + (kind.model or "") if kind.model else "c-96",
    }
    capacity = {"cpu": "192", "memory": "2113638Mi", "pods": "110", "ephemeral-storage": "3.5Ti"}
    allocatable = {"cpu": "190", "memory": "2101350Mi", "pods": "110", "ephemeral-storage": "3.2Ti"}
    if kind.model:
        labels[GPU_PRODUCT_LABEL] = kind.product or ""
        labels["example.com/gpu.count"] = str(GPUS_PER_NODE)
    else:
        capacity.update(cpu="96", memory="772390Mi")
        allocatable.update(cpu="94", memory="760102Mi")
    ready_condition = {
        "type": "Ready",
        "status": "True" if ready else "Unknown",
        "reason": "KubeletReady" if ready else "NodeStatusUnknown",
        "message": "kubelet is posting ready status"
        if ready
        else "Kubelet stopped posting node status.",
        "lastHeartbeatTime": now,
        "lastTransitionTime": created,
    }
    conditions = [
        {
            "type": kind_,
            "status": "False" if ready else "Unknown",
            "reason": f"KubeletHas{reason}" if ready else "NodeStatusUnknown",
            "message": "" if ready else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": now,
            "lastTransitionTime": created,
        }
        for kind_, reason in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    spec: dict[str, Any] = {"providerID": f"example://region-1/{zone}/{name}"}
    if not ready:
        spec["taints"] = [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now},
        ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata(name=name, uid=uid, created=created, labels=labels),
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [*conditions, ready_condition],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{hash_octets(name)}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.35.1",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kernelVersion": "6.8.0-60-generic",
                "osImage": "Ubuntu 24.04.2 LTS",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def hash_octets(name: str) -> str:
    index = int(name.rsplit("-", 1)[-1])
    return f"{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"


def _slice(
    *,
    rng: random.Random,
    driver: str,
    pool: str,
    generation: int,
    count: int,
    created: str,
    node: str | None = None,
    node_selector: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if node is not None:
        spec["nodeName"] = node
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    slice_name = name or f"{pool}-{driver}-{random_suffix(rng)}"
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": metadata(name=slice_name, uid=new_uid(rng), created=created, generation=1),
        "spec": spec,
    }


def _gpu_device(
    *, rng: random.Random, kind: NodeKind, index: int, driver_version: str
) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "model": {"string": kind.model},
            "productName": {"string": kind.product},
            "driverVersion": {"version": driver_version},
            "numa": {"int": index // (GPUS_PER_NODE // 2)},
            "index": {"int": index},
            "uuid": {"string": f"GPU-{new_uid(rng)}"},
        },
        "capacity": {
            "memory": {"value": f"{kind.memory_gi}Gi"},
            "multiprocessors": {"value": str(kind.multiprocessors)},
        },
    }


def gpu_slices(
    *, rng: random.Random, node: str, kind: NodeKind, generation: int, created: str
) -> list[dict[str, Any]]:
    """The gpu.example.com pool of one node: one slice, or counters + devices for MIG nodes."""
    driver_version = DRIVER_VERSIONS[0] if rng.random() < 0.8 else rng.choice(DRIVER_VERSIONS)
    devices = [
        _gpu_device(rng=rng, kind=kind, index=i, driver_version=driver_version)
        for i in range(GPUS_PER_NODE)
    ]
    if not kind.mig:
        device_slice = _slice(
            rng=rng,
            driver=GPU_DRIVER,
            pool=node,
            generation=generation,
            count=1,
            created=created,
            node=node,
        )
        device_slice["spec"]["devices"] = devices
        return [device_slice]
    whole = {"memory": f"{kind.memory_gi}Gi", "multiprocessors": str(kind.multiprocessors)}
    part = {"memory": "10Gi", "multiprocessors": "16"}
    counter_sets = []
    partitions = []
    for gpu in devices:
        index = gpu["attributes"]["index"]["int"]
        counter_set = f"gpu-{index}-counters"
        counter_sets.append(
            {"name": counter_set, "counters": {k: {"value": v} for k, v in whole.items()}}
        )
        gpu["consumesCounters"] = [
            {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in whole.items()}}
        ]
        for slot in range(MIG_PER_GPU):
            partitions.append(
                {
                    "name": f"gpu-{index}{MIG_INFIX}1g-10gb-{slot}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "profile": {"string": "1g.10gb"},
                        "model": {"string": kind.model},
                        "driverVersion": {"version": driver_version},
                        "numa": gpu["attributes"]["numa"],
                        "index": {"int": slot},
                        "parentIndex": {"int": index},
                        "parentUUID": gpu["attributes"]["uuid"],
                        "uuid": {"string": f"MIG-{new_uid(rng)}"},
                    },
                    "capacity": {k: {"value": v} for k, v in part.items()},
                    "consumesCounters": [
                        {
                            "counterSet": counter_set,
                            "counters": {k: {"value": v} for k, v in part.items()},
                        }
                    ],
                }
            )
    counters_slice = _slice(
        rng=rng,
        driver=GPU_DRIVER,
        pool=node,
        generation=generation,
        count=2,
        created=created,
        node=node,
    )
    counters_slice["spec"]["sharedCounters"] = counter_sets
    device_slice = _slice(
        rng=rng,
        driver=GPU_DRIVER,
        pool=node,
        generation=generation,
        count=2,
        created=created,
        node=node,
    )
    device_slice["spec"]["devices"] = devices + partitions
    return [counters_slice, device_slice]


def nic_slice(*, rng: random.Random, node: str, generation: int, created: str) -> dict[str, Any]:
    """Two shareable NICs whose bandwidth is consumable capacity."""
    nic = _slice(
        rng=rng,
        driver=NIC_DRIVER,
        pool=node,
        generation=generation,
        count=1,
        created=created,
        node=node,
    )
    nic["spec"]["devices"] = [
        {
            "name": f"nic-{i}",
            "attributes": {
                "type": {"string": "nic"},
                "interface": {"string": f"ens{i + 1}f0"},
                "numa": {"int": i},
                "rdma": {"bool": True},
                "macAddress": {
                    "string": f"02:00:{rng.randrange(256):02x}:{rng.randrange(256):02x}"
                    f":{rng.randrange(256):02x}:{i:02x}"
                },
            },
            "capacity": {
                "bandwidth": {
                    "value": "100G",
                    "requestPolicy": {
                        "default": "10G",
                        "validRange": {"min": "1G", "step": "1G"},
                    },
                }
            },
            "allowMultipleAllocations": True,
        }
        for i in range(2)
    ]
    return nic


def zone_selector(zone: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}
        ]
    }


def fabric_slices(
    *, rng: random.Random, pool: str, zone: str, present: int, declared: int, created: str
) -> list[dict[str, Any]]:
    """A network-attached pool reachable from one zone (incomplete when `present` < `declared`)."""
    slices = []
    for part in range(present):
        fabric = _slice(
            rng=rng,
            driver=FABRIC_DRIVER,
            pool=pool,
            generation=1,
            count=declared,
            created=created,
            node_selector=zone_selector(zone),
            name=f"{pool}-{part}",
        )
        fabric["spec"]["devices"] = [
            {
                "name": f"link-{part * 8 + i}",
                "attributes": {
                    "type": {"string": "fabric-link"},
                    "rack": {"string": pool.removeprefix("fabric-")},
                    "port": {"int": part * 8 + i},
                },
                "capacity": {"bandwidth": {"value": "400G"}},
            }
            for i in range(8)
        ]
        slices.append(fabric)
    return slices
