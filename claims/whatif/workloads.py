"""Workloads turned into the pods their controllers would create, named like theirs.

A Deployment or ReplicaSet (ReplicationController too) gives `replicas` pods (`<name>-<n>`; the
real ones add a template hash and a random suffix), a StatefulSet `replicas` pods `<name>-<ordinal>`
(its volumeClaimTemplates are storage, irrelevant here), a Job `min(parallelism, completions)` pods
(each defaults to 1), a CronJob the pods of its `jobTemplate`, a DaemonSet one pod per eligible
node: it is expanded later, against the cluster's nodes (`per_node`). A malformed field is a
`WhatIfError` naming it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claims.whatif.inputs import WhatIfError

JSON = dict[str, Any]

WORKLOAD_KINDS = frozenset(
    {
        "Deployment",
        "ReplicaSet",
        "ReplicationController",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
    }
)
# Pods one what-if places, all workloads together (each is asked node after node).
MAX_PODS = 100


@dataclass
class WorkloadPods:
    """The pods of one workload: their objects (a DaemonSet's one template pod, `per_node`)."""

    kind: str
    name: str
    pods: list[JSON]
    per_node: bool = False


def _mapping(value: Any, *, where: str, path: str, required: bool = False) -> Mapping[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        if value is None:
            raise WhatIfError(f"{where}: {path}", "required field missing")
        raise WhatIfError(f"{where}: {path}", f"expected an object, got {type(value).__name__}")
    return value


def _whole(value: Any, *, where: str, path: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise WhatIfError(f"{where}: {path}", f"expected a whole number, got {value!r}")
    if value < 0:
        raise WhatIfError(f"{where}: {path}", "must be 0 or more")
    return value


def expand_workload(document: Mapping[str, Any], *, where: str) -> WorkloadPods:
    """The pods a workload's controller would create (not yet normalized)."""
    kind = str(document.get("kind"))
    meta = _mapping(document.get("metadata"), where=where, path="metadata")
    name = meta.get("name")
    if name is not None and not isinstance(name, str):
        raise WhatIfError(f"{where}: metadata.name", "expected a string")
    name = name or "what-if"
    spec = _mapping(document.get("spec"), where=where, path="spec", required=True)
    prefix = "spec"
    if kind == "CronJob":
        job = _mapping(spec.get("jobTemplate"), where=where, path="spec.jobTemplate", required=True)
        spec = _mapping(job.get("spec"), where=where, path="spec.jobTemplate.spec", required=True)
        prefix = "spec.jobTemplate.spec"
    template = _mapping(spec.get("template"), where=where, path=f"{prefix}.template", required=True)
    template_meta = _mapping(
        template.get("metadata"), where=where, path=f"{prefix}.template.metadata"
    )
    pod_spec = _mapping(
        template.get("spec"), where=where, path=f"{prefix}.template.spec", required=True
    )
    if kind in {"Job", "CronJob"}:
        parallelism = _whole(
            spec.get("parallelism"), where=where, path=f"{prefix}.parallelism", default=1
        )
        completions = _whole(
            spec.get("completions"), where=where, path=f"{prefix}.completions", default=1
        )
        replicas = min(parallelism, completions)
    elif kind == "DaemonSet":
        replicas = 1
    else:
        replicas = _whole(spec.get("replicas"), where=where, path="spec.replicas", default=1)
    if replicas > MAX_PODS:
        raise WhatIfError(
            f"{where}: {prefix}.{'replicas' if kind not in {'Job', 'CronJob'} else 'parallelism'}",
            f"{replicas} pods; a what-if places at most {MAX_PODS}",
        )
    namespace = meta.get("namespace")
    pods = []
    for index in range(replicas):
        pod_meta: JSON = {
            "name": name if kind == "DaemonSet" else f"{name}-{index}",
            **({"namespace": namespace} if namespace else {}),
        }
        labels = template_meta.get("labels")
        if isinstance(labels, Mapping):
            pod_meta["labels"] = dict(labels)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": pod_meta,
                "spec": copy.deepcopy(dict(pod_spec)),
            }
        )
    return WorkloadPods(kind=kind, name=str(name), pods=pods, per_node=kind == "DaemonSet")


# The tolerations the DaemonSet controller adds to its pods (pkg/controller/daemon/util).
DAEMONSET_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
