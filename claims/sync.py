"""Store claims, templates, pods with claims, quotas and classic scheduling contexts.

Registers one handler per kind with `inventory.sync`, which owns batching, normalization and
publishing; this module only knows how each kind maps onto its rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claims.choices import ClaimState
from claims.models import (
    AllocatedDevice,
    PodSchedulingContext,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from claims.models import Pod as PodModel
from inventory.choices import Kind
from inventory.models import KubeObject
from inventory.sync import (
    AFTER_COMMIT,
    JSON,
    BatchResult,
    KindHandler,
    count_change,
    delete_row,
    meta_columns,
    object_uid,
    register,
    upsert_row,
)


def claim_state(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    classic = obj.get("classic") or {}
    if classic.get("deallocationRequested"):
        return ClaimState.DEALLOCATION_REQUESTED
    allocated = bool(status.get("allocation")) or bool(classic.get("allocation"))
    if not allocated:
        return ClaimState.PENDING
    if status.get("reservedFor"):
        return ClaimState.RESERVED
    return ClaimState.ALLOCATED


def selector_node_name(node_selector: Mapping[str, Any] | None) -> str:
    """The single node a nodeSelector names through metadata.name or the hostname label, if any."""
    if not node_selector:
        return ""
    terms = node_selector.get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return ""
    term = terms[0]
    for requirement in (term.get("matchFields") or []) + (term.get("matchExpressions") or []):
        key = requirement.get("key")
        values = requirement.get("values") or []
        if (
            key in {"metadata.name", "kubernetes.io/hostname"}
            and requirement.get("operator") == "In"
            and len(values) == 1
        ):
            return str(values[0])
    return ""


def _requests(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((spec.get("devices") or {}).get("requests") or [])


def device_classes_of(spec: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for request in _requests(spec):
        exactly = request.get("exactly") or {}
        if exactly.get("deviceClassName"):
            names.append(str(exactly["deviceClassName"]))
        for sub in request.get("firstAvailable") or []:
            if sub.get("deviceClassName"):
                names.append(str(sub["deviceClassName"]))
    return sorted(set(names))


def upsert_claim(obj: JSON, raw: JSON, result: BatchResult) -> None:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    owners = meta.get("ownerReferences") or []
    columns = meta_columns(raw, obj)
    columns.update(
        state=claim_state(obj),
        classic="classic" in obj,
        node_name=selector_node_name(allocation.get("nodeSelector")),
        device_classes=device_classes_of(spec),
        request_count=len(_requests(spec)),
        allocated_count=len(results),
        template_name=str(
            (meta.get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name", "")
        ),
        owner_pod=next((str(o.get("name")) for o in owners if o.get("kind") == "Pod"), ""),
    )
    row, changed, created = upsert_row(
        ResourceClaim,
        uid=object_uid(obj),
        columns=columns,
        namespace=str(meta.get("namespace", "")),
        result=result,
    )
    if not changed:
        result.unchanged += 1
        return
    if not created:
        row.allocated_devices.all().delete()
        row.reservations.all().delete()
    _add_allocation(row, results, status.get("devices") or [])
    _add_reservations(row, status.get("reservedFor") or [])
    result.upserted += 1
    result.touch("claims", row.pk)
    result.touch(
        "devices", *(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results)
    )


def _add_allocation(
    row: ResourceClaim, results: list[Mapping[str, Any]], device_status: list[Mapping[str, Any]]
) -> None:
    statuses = {
        (s.get("driver"), s.get("pool"), s.get("device"), s.get("shareID") or ""): s
        for s in device_status
    }
    rows = []
    for entry in results:
        share_id = str(entry.get("shareID") or "")
        status = statuses.get(
            (entry.get("driver"), entry.get("pool"), entry.get("device"), share_id), {}
        )
        rows.append(
            AllocatedDevice(
                claim=row,
                request=str(entry.get("request", "")),
                driver=str(entry.get("driver", "")),
                pool=str(entry.get("pool", "")),
                device=str(entry.get("device", "")),
                share_id=share_id,
                consumed_capacity=entry.get("consumedCapacity") or {},
                admin_access=bool(entry.get("adminAccess")),
                tolerations=entry.get("tolerations") or [],
                binding_conditions=entry.get("bindingConditions") or [],
                binding_failure_conditions=entry.get("bindingFailureConditions") or [],
                conditions=status.get("conditions") or [],
                network_data=status.get("networkData"),
                data=status.get("data"),
            )
        )
    AllocatedDevice.objects.bulk_create(rows)


def _add_reservations(row: ResourceClaim, reserved_for: list[Mapping[str, Any]]) -> None:
    Reservation.objects.bulk_create(
        Reservation(
            claim=row,
            api_group=str(ref.get("apiGroup") or ""),
            resource=str(ref.get("resource") or "pods"),
            name=str(ref.get("name", "")),
            consumer_uid=str(ref.get("uid", "")),
        )
        for ref in reserved_for
    )


def delete_claim(row: KubeObject, result: BatchResult) -> None:
    assert isinstance(row, ResourceClaim)
    result.touch("claims", row.pk)
    result.touch("devices", *(ad.key for ad in row.allocated_devices.all()))
    row.delete()


def upsert_template(obj: JSON, raw: JSON, result: BatchResult) -> None:
    meta = obj["metadata"]
    columns = meta_columns(raw, obj)
    columns["device_classes"] = device_classes_of(((obj.get("spec") or {}).get("spec")) or {})
    row, changed, _ = upsert_row(
        ResourceClaimTemplate,
        uid=object_uid(obj),
        columns=columns,
        namespace=str(meta.get("namespace", "")),
        result=result,
    )
    count_change(result, changed, "templates", row.pk)


def pod_uses_claims(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("resourceClaims"))


def upsert_pod(obj: JSON, raw: JSON, result: BatchResult) -> None:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers: dict[str, list[str]] = {}
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        claims = (container.get("resources") or {}).get("claims") or []
        if claims:
            containers[str(container.get("name"))] = [str(c.get("name")) for c in claims]
    columns = meta_columns(raw, obj)
    columns.update(
        phase=str(status.get("phase") or ""),
        node_name=str(spec.get("nodeName") or ""),
        resource_claims=spec.get("resourceClaims") or [],
        container_claims=containers,
        claim_statuses=status.get("resourceClaimStatuses") or [],
    )
    row, changed, _ = upsert_row(
        PodModel,
        uid=object_uid(obj),
        columns=columns,
        namespace=str(meta.get("namespace", "")),
        result=result,
    )
    count_change(result, changed, "pods", row.pk)


def upsert_quota(obj: JSON, raw: JSON, result: BatchResult) -> None:
    meta = obj["metadata"]
    columns = meta_columns(raw, obj)
    columns["hard"] = (
        (obj.get("status") or {}).get("hard") or (obj.get("spec") or {}).get("hard") or {}
    )
    columns["used"] = (obj.get("status") or {}).get("used") or {}
    row, changed, _ = upsert_row(
        ResourceQuota,
        uid=object_uid(obj),
        columns=columns,
        namespace=str(meta.get("namespace", "")),
        result=result,
    )
    count_change(result, changed, "quotas", row.pk)


def upsert_scheduling_context(obj: JSON, raw: JSON, result: BatchResult) -> None:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    columns = meta_columns(raw, obj)
    columns["selected_node"] = str(spec.get("selectedNode") or "")
    columns["potential_nodes"] = spec.get("potentialNodes") or []
    row, changed, _ = upsert_row(
        PodSchedulingContext,
        uid=object_uid(obj),
        columns=columns,
        namespace=str(meta.get("namespace", "")),
        result=result,
    )
    count_change(result, changed, "pods", row.pk)


# Changes that can alter whether a waiting claim fits.
DIAGNOSIS_TOPICS = frozenset({"claims", "pods", "slices", "devices", "nodes", "classes", "pools"})


def trigger_diagnoses(result: BatchResult) -> None:
    if DIAGNOSIS_TOPICS.intersection(result.changed):
        from claims.tasks import schedule_diagnoses

        schedule_diagnoses()


def register_handlers() -> None:
    AFTER_COMMIT.append(trigger_diagnoses)
    register(
        KindHandler(Kind.RESOURCE_CLAIM, ResourceClaim, upsert_claim, delete_claim, namespaced=True)
    )
    register(
        KindHandler(
            Kind.RESOURCE_CLAIM_TEMPLATE,
            ResourceClaimTemplate,
            upsert_template,
            delete_row("templates"),
            namespaced=True,
        )
    )
    register(
        KindHandler(
            Kind.POD,
            PodModel,
            upsert_pod,
            delete_row("pods"),
            namespaced=True,
            keep=pod_uses_claims,
        )
    )
    register(
        KindHandler(
            Kind.RESOURCE_QUOTA, ResourceQuota, upsert_quota, delete_row("quotas"), namespaced=True
        )
    )
    register(
        KindHandler(
            Kind.POD_SCHEDULING_CONTEXT,
            PodSchedulingContext,
            upsert_scheduling_context,
            delete_row("pods"),
            namespaced=True,
        )
    )
