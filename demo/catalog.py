"""What the demo cluster is made of: drivers, DeviceClasses, claim templates and namespaces.

Pure data and small helpers shared by the generator and the churn loop. DeviceClass and request
selectors are written in CEL as a real cluster would have them; the real allocator evaluates them.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
FABRIC_DRIVER = "fabric.example.com"

RESOURCE_API = "resource.k8s.io/v1"
ZONE_LABEL = "topology.kubernetes.io/zone"
POOL_LABEL = "example.com/node-pool"
GPU_PRODUCT_LABEL = "example.com/gpu.product"
ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"

# Workload namespaces carry a ResourceQuota; the admin namespace does not, as KEP-5018 recommends
# for namespaces that use adminAccess (those requests count toward quota like any other).
WORKLOAD_NAMESPACES = ("team-a", "team-b", "ml-training", "inference")
ADMIN_NAMESPACE = "dra-admin"
NAMESPACES = (*WORKLOAD_NAMESPACES, ADMIN_NAMESPACE)
ZONES = ("zone-a", "zone-b", "zone-c")

# Ordinary pods (no claims) running beside the GPU workloads, so nodes fill on cpu and memory
# too: app -> (namespaces, cpu, memory, host port or None, relative odds).
SERVICE_APPS: dict[str, tuple[tuple[str, ...], str, str, int | None, float]] = {
    "web": (("team-a", "team-b", "inference"), "4", "8Gi", None, 4.0),
    "api": (("team-a", "team-b"), "8", "32Gi", None, 3.0),
    "cache": (("inference", "team-b"), "16", "128Gi", None, 1.5),
    "spark-executor": (("team-b", "ml-training"), "32", "256Gi", None, 1.0),
    "log-shipper": (("team-a", "team-b", "ml-training", "inference"), "1", "1Gi", None, 1.0),
}
# One per node on most nodes, binding a host port (what NodePorts checks).
INGRESS_APP = "ingress-proxy"
INGRESS: tuple[tuple[str, ...], str, str, int | None] = (("team-a",), "500m", "1Gi", 443)

# Base time of the demo: fixed so that output is a pure function of (nodes, seed).
EPOCH = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)


class DemoError(ValueError):
    """Raised when objects handed to the demo do not have the shape it needs."""


def timestamp(moment: datetime) -> str:
    """RFC 3339 in the second-precision form the API server uses."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def at(seconds: float) -> str:
    """Timestamp `seconds` after the demo epoch (negative for the past)."""
    return timestamp(EPOCH + timedelta(seconds=int(seconds)))


def new_uid(rng: random.Random) -> str:
    """A version-4 UUID drawn from the seeded RNG, so uids repeat for a seed."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_suffix(rng: random.Random, length: int = 5) -> str:
    """The kind of suffix generateName adds (consonants and digits, as apimachinery does)."""
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))


def metadata(
    *,
    name: str,
    uid: str,
    created: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    generation: int | None = None,
) -> dict[str, Any]:
    """ObjectMeta as `kubectl get -o json` shows it (resourceVersion is the server's business)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["uid"] = uid
    meta["creationTimestamp"] = created
    if generation is not None:
        meta["generation"] = generation
    meta["labels"] = dict(labels or {})
    return meta


def selectors(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}} for expression in expressions]


def _opaque(driver: str, kind: str, **parameters: Any) -> dict[str, Any]:
    return {
        "opaque": {
            "driver": driver,
            "parameters": {"apiVersion": f"{driver}/v1", "kind": kind, **parameters},
        }
    }


GPU_SELECTORS = selectors(
    f'device.driver == "{GPU_DRIVER}"', f'device.attributes["{GPU_DRIVER}"].type == "gpu"'
)

DEVICE_CLASSES: dict[str, dict[str, Any]] = {
    GPU_DRIVER: {
        "selectors": GPU_SELECTORS,
        "config": [_opaque(GPU_DRIVER, "GpuConfig", sharing={"strategy": "Exclusive"})],
        "extendedResourceName": "example.com/gpu",
    },
    "gpu-h100": {
        "selectors": [
            *GPU_SELECTORS,
            *selectors(f'device.attributes["{GPU_DRIVER}"].model == "h100"'),
        ],
        "config": [_opaque(GPU_DRIVER, "GpuConfig", sharing={"strategy": "Exclusive"})],
    },
    "mig-1g.10gb": {
        "selectors": selectors(
            f'device.driver == "{GPU_DRIVER}"',
            f'device.attributes["{GPU_DRIVER}"].type == "mig"',
            f'device.attributes["{GPU_DRIVER}"].profile == "1g.10gb"',
        ),
        "config": [_opaque(GPU_DRIVER, "MigDeviceConfig", sharing={"strategy": "Exclusive"})],
    },
    NIC_DRIVER: {
        "selectors": selectors(f'device.driver == "{NIC_DRIVER}"'),
        "config": [_opaque(NIC_DRIVER, "NicConfig", mtu=9000, rdma=True)],
    },
    FABRIC_DRIVER: {"selectors": selectors(f'device.driver == "{FABRIC_DRIVER}"')},
}


def _exact(name: str, device_class: str, *, count: int = 1, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


NUMA = f"{GPU_DRIVER}/numa"

# ResourceClaim specs by template name; every workload namespace gets all of them.
CLAIM_SPECS: dict[str, dict[str, Any]] = {
    "single-gpu": {"devices": {"requests": [_exact("gpu", GPU_DRIVER)]}},
    "gpu-pair": {
        "devices": {
            "requests": [_exact("gpus", GPU_DRIVER, count=2)],
            "constraints": [{"requests": ["gpus"], "matchAttribute": NUMA}],
            "config": [
                {"requests": ["gpus"], **_opaque(GPU_DRIVER, "GpuConfig", nvlink=True)},
            ],
        }
    },
    "h100-quad": {
        "devices": {
            "requests": [_exact("gpus", "gpu-h100", count=4)],
            "constraints": [{"requests": ["gpus"], "matchAttribute": NUMA}],
        }
    },
    "h100-octet": {"devices": {"requests": [_exact("gpus", "gpu-h100", count=8)]}},
    "mig-1g": {"devices": {"requests": [_exact("mig", "mig-1g.10gb")]}},
    "nic-10g": {
        "devices": {
            "requests": [
                _exact("nic", NIC_DRIVER, capacity={"requests": {"bandwidth": "10G"}}),
            ]
        }
    },
    "nic-25g": {
        "devices": {
            "requests": [
                _exact("nic", NIC_DRIVER, capacity={"requests": {"bandwidth": "25G"}}),
            ]
        }
    },
    "gpu-flex": {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {
                            "name": "h100",
                            "deviceClassName": "gpu-h100",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                        {
                            "name": "any",
                            "deviceClassName": GPU_DRIVER,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": selectors(
                                f'device.capacity["{GPU_DRIVER}"].memory'
                                '.compareTo(quantity("80Gi")) >= 0'
                            ),
                        },
                    ],
                }
            ]
        }
    },
    "fabric-link": {"devices": {"requests": [_exact("link", FABRIC_DRIVER)]}},
    "gpu-recent-driver": {
        "devices": {
            "requests": [
                _exact(
                    "gpu",
                    GPU_DRIVER,
                    selectors=selectors(
                        f'device.attributes["{GPU_DRIVER}"].driverVersion'
                        '.isGreaterThan(semver("550.0.0"))'
                    ),
                )
            ]
        }
    },
}

# adminAccess with allocationMode All: a monitoring agent that sees every GPU of one node.
ADMIN_CLAIM_SPEC: dict[str, Any] = {
    "devices": {
        "requests": [
            {
                "name": "gpus",
                "exactly": {
                    "deviceClassName": GPU_DRIVER,
                    "allocationMode": "All",
                    "adminAccess": True,
                },
            }
        ]
    }
}
ADMIN_TEMPLATE = "gpu-monitor"
