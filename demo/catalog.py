"""What the demo cluster is made of: drivers, DeviceClasses, claim templates and namespaces.

Pure data and small helpers shared by the generator and the churn loop. DeviceClass selectors are
written in CEL as a real cluster would have them; each CEL expression used anywhere in the demo also
has a Python predicate here, so the demo can allocate first-fit without a CEL engine. A claim whose
selector is not in that table is simply never allocated by the demo.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
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

# Base time of the demo: fixed so that output is a pure function of (nodes, seed).
EPOCH = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)

_QUANTITY_RE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_SUFFIX = {
    None: 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


class DemoError(ValueError):
    """Raised when objects handed to the demo do not have the shape it needs."""


def parse_quantity(value: str, *, where: str) -> int:
    """Integer value of a quantity in the forms the demo writes ("80Gi", "100G", "132")."""
    match = _QUANTITY_RE.match(str(value))
    if match is None:
        raise DemoError(f"{where}: unsupported quantity {value!r}")
    return int(match.group(1)) * _SUFFIX[match.group(2)]


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


def attribute_value(attribute: dict[str, Any]) -> Any:
    """The Python value of a DeviceAttribute ({"int": 1} -> 1)."""
    for kind in ("int", "bool", "string", "version"):
        if kind in attribute:
            return attribute[kind]
    return None


@dataclass(slots=True)
class DeviceInfo:
    """One device as the allocator sees it: where it is and what it offers."""

    driver: str
    pool: str
    name: str
    node: str | None
    zone: str | None
    attributes: dict[str, Any]
    capacity: dict[str, int]
    consumes: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    shared_default: dict[str, str] = field(default_factory=dict)
    multiple: bool = False
    tainted: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


Predicate = Callable[[DeviceInfo], bool]

# Every CEL selector the demo writes, with its meaning in Python.
CEL_PREDICATES: dict[str, Predicate] = {
    f'device.driver == "{GPU_DRIVER}"': lambda d: d.driver == GPU_DRIVER,
    f'device.attributes["{GPU_DRIVER}"].type == "gpu"': lambda d: d.attributes.get("type") == "gpu",
    f'device.attributes["{GPU_DRIVER}"].type == "mig"': lambda d: d.attributes.get("type") == "mig",
    f'device.attributes["{GPU_DRIVER}"].model == "h100"': lambda d: (
        d.attributes.get("model") == "h100"
    ),
    f'device.attributes["{GPU_DRIVER}"].profile == "1g.10gb"': lambda d: (
        d.attributes.get("profile") == "1g.10gb"
    ),
    f'device.driver == "{NIC_DRIVER}"': lambda d: d.driver == NIC_DRIVER,
    f'device.driver == "{FABRIC_DRIVER}"': lambda d: d.driver == FABRIC_DRIVER,
    f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("80Gi")) >= 0': lambda d: (
        d.capacity.get("memory", 0) >= 80 * 2**30
    ),
    f'device.attributes["{GPU_DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))': lambda d: (
        tuple(int(p) for p in str(d.attributes.get("driverVersion", "0.0.0")).split("."))
        > (550, 0, 0)
    ),
}


def selectors(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}} for expression in expressions]


def selectors_match(items: list[dict[str, Any]], device: DeviceInfo) -> bool:
    """True when every CEL selector is known and matches; unknown CEL never matches."""
    for item in items:
        expression = (item.get("cel") or {}).get("expression")
        predicate = CEL_PREDICATES.get(expression or "")
        if predicate is None or not predicate(device):
            return False
    return True


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

ALLOCATION_RESULTS_MAX_SIZE = 32


def quota_usage(spec: dict[str, Any]) -> dict[str, int]:
    """What one ResourceClaim adds to its namespace's quota, as Kubernetes counts it.

    One `count/resourceclaims.resource.k8s.io`, and per DeviceClass the devices the claim may
    take (`<class>.deviceclass.resource.k8s.io/devices`): the count for ExactCount, 32 for All,
    for firstAvailable the largest alternative per class. A claim's devices also count toward
    the class's extended-resource names, `requests.deviceclass.resource.kubernetes.io/<class>`
    and `requests.<extendedResourceName>`. Extended resources have no `limits.` form in quota
    (they cannot be overcommitted), so none is produced.
    """
    usage: dict[str, int] = {"count/resourceclaims.resource.k8s.io": 1}
    per_class: dict[str, int] = {}
    for request in (spec.get("devices") or {}).get("requests") or []:
        alternatives = request.get("firstAvailable") or []
        if alternatives:
            largest: dict[str, int] = {}
            for sub in alternatives:
                name = sub.get("deviceClassName", "")
                largest[name] = max(largest.get(name, 0), _device_count(sub))
            for name, count in largest.items():
                per_class[name] = per_class.get(name, 0) + count
        elif request.get("exactly"):
            name = request["exactly"].get("deviceClassName", "")
            per_class[name] = per_class.get(name, 0) + _device_count(request["exactly"])
    for name, count in per_class.items():
        usage[f"{name}.deviceclass.resource.k8s.io/devices"] = count
        usage[f"requests.deviceclass.resource.kubernetes.io/{name}"] = count
        extended = DEVICE_CLASSES.get(name, {}).get("extendedResourceName")
        if extended:
            usage[f"requests.{extended}"] = usage.get(f"requests.{extended}", 0) + count
    return usage


def _device_count(request: dict[str, Any]) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        return int(request.get("count") or 1)
    if mode == "All":
        return ALLOCATION_RESULTS_MAX_SIZE
    return 0
