"""What the dashboard keeps of a Pod: a slim projection of every pod, the whole object (redacted)
of pods that use claims, and a Pod again for export.

Every pod is stored as a slim projection: its node, phase, priority, what it requests of its node
(as the scheduler counts it) and its host ports, so what-if knows what else runs on a node. The
whole object (redacted) is kept only for pods that use ResourceClaims or ask for an extended
resource backed by a DeviceClass (the scheduler then makes a claim for them); a pod listed before
the class that backs its resource existed keeps its object only from its next event or list.
`claims.sync` registers the Pod kind with these columns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from claims.devices.health import resource_health_of
from claims.models import Pod as PodModel
from claims.templates import link_claims_of_pods
from claims.whatif.extended import DEVICE_CLASS_PREFIX, requested_names
from claims.whatif.podtopology import anti_affinity_terms
from claims.whatif.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    host_ports,
    pod_request_units,
    with_request_defaults,
)
from inventory.models import DeviceClass
from inventory.sync import JSON, BatchResult, Written


def pods_written(written: list[Written], result: BatchResult) -> None:
    """Count and announce written pods, then re-link the claims they own to templates."""
    for entry in written:
        result.upserted += 1
        result.touch("pods", entry.row.pk)
    # Only pods whose claim entries may have changed: most pod updates are status.
    link_claims_of_pods(
        (entry.row.namespace, entry.row.name)
        for entry in written
        if entry.row.uses_claims
        and (entry.created or entry.item.stored.get("resource_claims") != entry.row.resource_claims)
    )


def pod_uses_claims(obj: Mapping[str, Any]) -> bool:
    """Pods with ResourceClaims, or asking for an extended resource a DeviceClass backs."""
    spec = obj.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    asked = requested_names(spec)
    if not asked:
        return False
    if any(name.startswith(DEVICE_CLASS_PREFIX) for name in asked):
        return True
    return bool(asked & dra_extended_names())


# Extended resource names DeviceClasses back: read once per DRA_NAMES_SECONDS, and again as soon
# as a sync batch of this process changed a class.
DRA_NAMES_SECONDS = 30.0
_dra_names: tuple[float, frozenset[str]] | None = None


def dra_extended_names() -> frozenset[str]:
    """The `spec.extendedResourceName`s of the stored DeviceClasses."""
    global _dra_names
    now = time.monotonic()
    if _dra_names is None or now - _dra_names[0] > DRA_NAMES_SECONDS:
        names = DeviceClass.objects.exclude(extended_resource_name="").values_list(
            "extended_resource_name", flat=True
        )
        _dra_names = (now, frozenset(names))
    return _dra_names[1]


def forget_dra_extended_names(result: BatchResult | None = None) -> None:
    """Read the classes' extended resource names again next time (after classes changed)."""
    global _dra_names
    if result is None or "classes" in result.changed:
        _dra_names = None


# What the dashboard keeps of a pod spec: scheduling and claims. Environment values, commands,
# arguments and volumes can carry secrets, and every signed-in viewer may read stored objects.
_POD_SPEC_KEYS = frozenset(
    {
        "nodeName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "resourceClaims",
        "schedulerName",
        "priorityClassName",
        "priority",
        "schedulingGates",
        "runtimeClassName",
        "overhead",
        "resources",
        "activeDeadlineSeconds",
        "hostNetwork",
        "topologySpreadConstraints",
        "serviceAccountName",
    }
)
_CONTAINER_KEYS = frozenset({"name", "image", "resources", "restartPolicy", "ports"})
_SECRET_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def redact_pod(obj: JSON) -> JSON:
    """The pod without what may hold secrets: env, commands, volumes, last-applied config.

    The one exception to keeping objects whole (DESIGN: nothing the cluster said is dropped):
    pods are shown to every viewer, and their specs routinely carry credentials.
    """
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in _SECRET_ANNOTATIONS}
    out["metadata"] = meta
    spec = out.get("spec")
    if isinstance(spec, dict):
        kept = {k: v for k, v in spec.items() if k in _POD_SPEC_KEYS}
        for key in ("initContainers", "containers", "ephemeralContainers"):
            containers = spec.get(key)
            if isinstance(containers, list):
                kept[key] = [
                    {k: v for k, v in c.items() if k in _CONTAINER_KEYS}
                    if isinstance(c, dict)
                    else c
                    for c in containers
                ]
        out["spec"] = kept
    return out


def pod_usage(obj: Mapping[str, Any]) -> JSON:
    """The slim projection every pod keeps: what the scheduler's node accounting reads."""
    spec = with_request_defaults(obj.get("spec") or {})
    status = obj.get("status") or {}
    units = pod_request_units(spec, status=status)
    priority = spec.get("priority")
    return {
        "phase": str(status.get("phase") or ""),
        "node_name": str(spec.get("nodeName") or ""),
        "priority": priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        "cpu_request": units.pop(CPU, 0),
        "memory_request": units.pop(MEMORY, 0),
        "storage_request": units.pop(EPHEMERAL_STORAGE, 0),
        "other_requests": units,
        "host_ports": [list(port) for port in host_ports(spec)],
        "anti_affinity": anti_affinity_terms(spec),
    }


def pod_columns(obj: JSON) -> JSON:
    columns = pod_usage(obj)
    if not pod_uses_claims(obj):
        # Not kept: the projection says all the dashboard needs of this pod.
        return {
            **columns,
            "uses_claims": False,
            "raw": {},
            "obj": {},
            "resource_claims": [],
            "container_claims": {},
            "claim_statuses": [],
            "resource_health": [],
        }
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers: dict[str, list[str]] = {}
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        claims = (container.get("resources") or {}).get("claims") or []
        if claims:
            containers[str(container.get("name"))] = [str(c.get("name")) for c in claims]
    return {
        **columns,
        "uses_claims": True,
        "resource_claims": spec.get("resourceClaims") or [],
        "container_claims": containers,
        "claim_statuses": status.get("resourceClaimStatuses") or [],
        "resource_health": resource_health_of(obj),
    }


# What export writes for a pod kept as a projection: enough to import it again as the same rows.
PROJECTED_CONTAINER = "requests"


def projected_pod(row: Mapping[str, Any]) -> JSON:
    """A Pod object standing for a pod stored as a projection: one container carrying its
    requests and host ports (importing it again gives the same projection)."""
    requests: dict[str, Any] = {}
    if row["cpu_request"]:
        requests[CPU] = f"{row['cpu_request']}m"
    if row["memory_request"]:
        requests[MEMORY] = str(row["memory_request"])
    if row["storage_request"]:
        requests[EPHEMERAL_STORAGE] = str(row["storage_request"])
    requests.update({str(k): str(v) for k, v in (row["other_requests"] or {}).items()})
    container: JSON = {"name": PROJECTED_CONTAINER, "resources": {"requests": requests}}
    if row["host_ports"]:
        container["ports"] = [
            {"containerPort": port, "hostPort": port, "hostIP": ip, "protocol": protocol}
            for ip, protocol, port in row["host_ports"]
        ]
    metadata: JSON = {
        "name": row["name"],
        "namespace": row["namespace"],
        "uid": row["uid"],
        "resourceVersion": row["resource_version"],
    }
    if row["labels"]:
        metadata["labels"] = row["labels"]
    if row["created_at"] is not None:
        metadata["creationTimestamp"] = row["created_at"].strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: JSON = {"containers": [container]}
    if row["anti_affinity"]:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": row["anti_affinity"]
            }
        }
    if row["node_name"]:
        spec["nodeName"] = row["node_name"]
    if row["priority"]:
        spec["priority"] = row["priority"]
    out: JSON = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if row["phase"]:
        out["status"] = {"phase": row["phase"]}
    return out


def export_pods() -> Iterator[JSON]:
    """Every pod for a snapshot: the kept object, or the projection as a Pod."""
    fields = (
        "uses_claims",
        "raw",
        "name",
        "namespace",
        "uid",
        "resource_version",
        "labels",
        "created_at",
        "node_name",
        "phase",
        "priority",
        "cpu_request",
        "memory_request",
        "storage_request",
        "other_requests",
        "host_ports",
        "anti_affinity",
    )
    for row in PodModel.objects.order_by("namespace", "name").values(*fields).iterator():
        yield row["raw"] if row["uses_claims"] and row["raw"] else projected_pod(row)
