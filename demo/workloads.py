"""Builders for the objects workloads are made of: claims, templates, pods, quotas, classes.

Each builder returns a fresh dict shaped as `kubectl get -o json` shows it. Claims made from a
template follow what the resourceclaim controller does: name `<pod>-<podClaimName>-<suffix>`,
the pod-claim-name annotation, an owner reference to the pod, and the pod's
`status.resourceClaimStatuses` entry pointing back at it.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from demo.catalog import (
    ADMIN_NAMESPACE,
    ADMIN_NAMESPACE_LABEL,
    DEVICE_CLASSES,
    POD_CLAIM_ANNOTATION,
    RESOURCE_API,
    metadata,
    new_uid,
    random_suffix,
)

IMAGES = {
    "inference": "registry.example.com/serving/vllm:0.9.2",
    "trainer": "registry.example.com/ml/trainer:2.6.0",
    "finetune": "registry.example.com/ml/finetune:1.3.1",
    "flex": "registry.example.com/ml/batch:0.12.0",
    "notebook": "registry.example.com/jupyter/cuda:12.4",
    "shared": "registry.example.com/serving/triton:25.01",
    "etl": "registry.example.com/data/etl:3.2.0",
    "allreduce": "registry.example.com/ml/nccl-tests:2.13",
    "recent": "registry.example.com/ml/trainer:2.7.0-rc1",
    "gpu-monitor": "registry.example.com/ops/dcgm-exporter:4.1.1",
    "batch": "registry.example.com/ml/batch:0.12.0",
    "web": "registry.example.com/shop/web:5.4.1",
    "api": "registry.example.com/shop/api:5.4.1",
    "cache": "registry.example.com/infra/redis:7.4",
    "spark-executor": "registry.example.com/data/spark:3.5.4",
    "log-shipper": "registry.example.com/ops/fluent-bit:3.2",
    "ingress-proxy": "registry.example.com/infra/envoy:1.33",
}


def namespace_object(*, rng: random.Random, name: str, created: str) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name}
    if name == ADMIN_NAMESPACE:
        labels[ADMIN_NAMESPACE_LABEL] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(name=name, uid=new_uid(rng), created=created, labels=labels),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def device_class_object(*, rng: random.Random, name: str, created: str) -> dict[str, Any]:
    definition = DEVICE_CLASSES[name]
    spec: dict[str, Any] = {"selectors": copy.deepcopy(definition["selectors"])}
    if definition.get("config"):
        spec["config"] = copy.deepcopy(definition["config"])
    if definition.get("extendedResourceName"):
        spec["extendedResourceName"] = definition["extendedResourceName"]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": metadata(
            name=name,
            uid=new_uid(rng),
            created=created,
            generation=1,
            labels={"app.kubernetes.io/managed-by": "demo-driver-installer"},
        ),
        "spec": spec,
    }


def template_object(
    *, rng: random.Random, namespace: str, name: str, spec: dict[str, Any], created: str
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(
            name=name, namespace=namespace, uid=new_uid(rng), created=created, generation=1
        ),
        "spec": {
            "metadata": {"labels": {"example.com/claim-template": name}},
            "spec": copy.deepcopy(spec),
        },
    }


def claim_object(
    *,
    rng: random.Random,
    namespace: str,
    name: str,
    spec: dict[str, Any],
    created: str,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    pod_claim: str | None = None,
) -> dict[str, Any]:
    """A pending ResourceClaim; `owner` (a Pod) makes it template-generated."""
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=new_uid(rng),
        created=created,
        generation=1,
        labels=labels,
    )
    if owner is not None:
        meta["annotations"] = {POD_CLAIM_ANNOTATION: pod_claim or ""}
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": copy.deepcopy(spec),
        "status": {},
    }


def pod_name(rng: random.Random, app: str) -> str:
    return f"{app}-{random_suffix(rng, 9)}-{random_suffix(rng)}"


def _pending_pod(
    *,
    rng: random.Random,
    namespace: str,
    name: str,
    app: str,
    container: dict[str, Any],
    created: str,
    resource_claims: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Pending, unscheduled pod of one container, as a Deployment's controller creates it."""
    spec: dict[str, Any] = {"containers": [container]}
    if resource_claims is not None:
        spec["resourceClaims"] = resource_claims
    spec.update(
        restartPolicy="Always",
        schedulerName="default-scheduler",
        serviceAccountName="default",
        terminationGracePeriodSeconds=30,
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(
            name=name,
            namespace=namespace,
            uid=new_uid(rng),
            created=created,
            generation=1,
            labels={"app.kubernetes.io/name": app},
        ),
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def pod_object(
    *,
    rng: random.Random,
    namespace: str,
    name: str,
    app: str,
    claims: list[tuple[str, str, str]],
    created: str,
) -> dict[str, Any]:
    """A Pending, unscheduled pod; `claims` are (podClaimName, "template"|"claim", name)."""
    resource_claims = []
    for pod_claim, source, ref in claims:
        field = "resourceClaimTemplateName" if source == "template" else "resourceClaimName"
        resource_claims.append({"name": pod_claim, field: ref})
    container = {
        "name": "main",
        "image": IMAGES.get(app, IMAGES["batch"]),
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi"},
            "limits": {"memory": "64Gi"},
            "claims": [{"name": pod_claim} for pod_claim, _, _ in claims],
        },
    }
    return _pending_pod(
        rng=rng,
        namespace=namespace,
        name=name,
        app=app,
        container=container,
        created=created,
        resource_claims=resource_claims,
    )


def service_pod_object(
    *,
    rng: random.Random,
    namespace: str,
    name: str,
    app: str,
    cpu: str,
    memory: str,
    host_port: int | None,
    created: str,
) -> dict[str, Any]:
    """A Pending, unscheduled pod that uses no claim: cpu and memory (and maybe a host port)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": IMAGES.get(app, IMAGES["batch"]),
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"memory": memory},
        },
    }
    if host_port is not None:
        container["ports"] = [
            {"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}
        ]
    return _pending_pod(
        rng=rng, namespace=namespace, name=name, app=app, container=container, created=created
    )


def pending_status(pod: dict[str, Any], *, nodes: int, now: str) -> None:
    """What the scheduler writes when no node can take the pod's claims."""
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/{nodes} nodes are available: {nodes} cannot allocate all claims. "
            f"still not schedulable, preemption: 0/{nodes} nodes are available: "
            f"{nodes} Preemption is not helpful for scheduling.",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
    ]


def running_pod(pod: dict[str, Any], *, node: str, now: str, ip: str) -> dict[str, Any]:
    """Copy of a pod bound to `node` and running."""
    running = {**pod, "spec": dict(pod["spec"]), "status": dict(pod["status"])}
    running["spec"]["nodeName"] = node
    status = running["status"]
    status["phase"] = "Running"
    status["startTime"] = now
    status["podIP"] = ip
    status["podIPs"] = [{"ip": ip}]
    status["conditions"] = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for kind in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]
    return running


def reserved_claim(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """Copy of a claim with `pod` added to status.reservedFor."""
    updated = {**claim, "status": dict(claim["status"])}
    reserved = list(updated["status"].get("reservedFor") or [])
    reserved.append(
        {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    )
    updated["status"]["reservedFor"] = reserved
    return updated


def unreserved_claim(claim: dict[str, Any], pod_uid: str) -> dict[str, Any]:
    """Copy of a claim without `pod_uid` in status.reservedFor."""
    updated = {**claim, "status": dict(claim["status"])}
    reserved = [r for r in updated["status"].get("reservedFor") or [] if r.get("uid") != pod_uid]
    if reserved:
        updated["status"]["reservedFor"] = reserved
    else:
        updated["status"].pop("reservedFor", None)
    return updated


def deallocated_claim(claim: dict[str, Any]) -> dict[str, Any]:
    """Copy of a claim with neither allocation nor finalizer (back to pending)."""
    updated = {**claim, "metadata": dict(claim["metadata"]), "status": {}}
    updated["metadata"].pop("finalizers", None)
    return updated


def quota_object(
    *, rng: random.Random, namespace: str, hard: dict[str, int], used: dict[str, int], created: str
) -> dict[str, Any]:
    hard_text = {key: str(value) for key, value in sorted(hard.items())}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": metadata(
            name="dra-devices", namespace=namespace, uid=new_uid(rng), created=created
        ),
        "spec": {"hard": hard_text},
        "status": {
            "hard": dict(hard_text),
            "used": {key: str(used.get(key, 0)) for key in sorted(hard)},
        },
    }


def taint_rule_object(
    *, rng: random.Random, driver: str, pool: str, device: str, created: str
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceTaintRule",
        "metadata": metadata(
            name=f"maintenance-{pool}-{device}", uid=new_uid(rng), created=created, generation=1
        ),
        "spec": {
            "deviceSelector": {"driver": driver, "pool": pool, "device": device},
            "taint": {
                "key": "example.com/maintenance",
                "value": "planned",
                "effect": "NoSchedule",
                "timeAdded": created,
            },
        },
    }
