"""Store claims, templates, pods, quotas, LimitRanges, PriorityClasses, PodDisruptionBudgets and
classic scheduling contexts.

What is kept of a pod (a slim projection of every pod, the redacted object of pods that use
claims) is `claims.pods`'s.

Registers one handler per kind with `inventory.sync`, which owns batching, normalization and
publishing; this module only knows how each kind maps onto its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.db.models.fields.json import KeyTransform

from claims.choices import ClaimState
from claims.models import (
    AllocatedDevice,
    LimitRange,
    PodDisruptionBudget,
    PodSchedulingContext,
    PriorityClass,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from claims.models import Pod as PodModel
from claims.pods import (
    export_pods,
    forget_dra_extended_names,
    pod_columns,
    pods_written,
    redact_pod,
)
from claims.templates import link_templates
from inventory.choices import Kind
from inventory.sync import (
    AFTER_COMMIT,
    JSON,
    BatchResult,
    KindHandler,
    Pending,
    Written,
    chunks,
    delete_row,
    delete_rows,
    insert_rows,
    new_row,
    register,
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


def claim_columns(obj: JSON) -> JSON:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    allocation = (obj.get("status") or {}).get("allocation") or {}
    owners = meta.get("ownerReferences") or []
    return {
        "state": claim_state(obj),
        "classic": "classic" in obj,
        "node_name": selector_node_name(allocation.get("nodeSelector")),
        "device_classes": device_classes_of(spec),
        "request_count": len(_requests(spec)),
        "allocated_count": len(_results(obj)),
        # No template_name: the pod-claim-name annotation names the pod's claim entry, not a
        # template, so the name is found through the pod after the write (`claims.templates`),
        # and only a changed name is written (a column here would reset it on every update).
        "owner_pod": next((str(o.get("name")) for o in owners if o.get("kind") == "Pod"), ""),
    }


def _results(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def claim_children(obj: JSON) -> tuple[list[JSON], list[JSON]]:
    """AllocatedDevice and Reservation columns of one claim, from its status."""
    status = obj.get("status") or {}
    return _allocated_devices(_results(obj), status.get("devices") or []), _reservations(
        status.get("reservedFor") or []
    )


def _allocated_devices(
    results: list[Mapping[str, Any]], device_status: list[Mapping[str, Any]]
) -> list[JSON]:
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
            {
                "request": str(entry.get("request", "")),
                "driver": str(entry.get("driver", "")),
                "pool": str(entry.get("pool", "")),
                "device": str(entry.get("device", "")),
                "share_id": share_id,
                "consumed_capacity": entry.get("consumedCapacity") or {},
                "admin_access": bool(entry.get("adminAccess")),
                "tolerations": entry.get("tolerations") or [],
                "binding_conditions": entry.get("bindingConditions") or [],
                "binding_failure_conditions": entry.get("bindingFailureConditions") or [],
                "conditions": status.get("conditions") or [],
                "network_data": status.get("networkData"),
                "data": status.get("data"),
            }
        )
    return rows


def _reservations(reserved_for: list[Mapping[str, Any]]) -> list[JSON]:
    return [
        {
            "api_group": str(ref.get("apiGroup") or ""),
            "resource": str(ref.get("resource") or "pods"),
            "name": str(ref.get("name", "")),
            "consumer_uid": str(ref.get("uid", "")),
        }
        for ref in reserved_for
    ]


# What `stored_status` keeps of the stored claim, read before the row is written: its
# normalized status, the only part of a claim its devices and reservations come from.
STORED_STATUS = "status"


def stored_status(changed: list[Pending], result: BatchResult) -> None:
    """Read the stored status of the changed claims that are stored, one query per chunk.

    Not through `stored_fields`: resolving the key lookup by name (`obj__status`) there left
    reference cycles through the writer's frames, so a relist's objects stayed until a garbage
    collection instead of leaving with their segment (test_replace_all_consumes_its_input_once).
    """
    by_pk = {item.pk: item for item in changed if item.pk is not None}
    status = KeyTransform("status", "obj")
    for part in chunks(list(by_pk)):
        for pk, value in ResourceClaim.objects.filter(pk__in=part).values_list("pk", status):
            by_pk[pk].stored[STORED_STATUS] = value


def children_changed(entry: Written) -> bool:
    """Whether a written claim's allocated devices and reservations differ from its stored ones.

    An update that leaves the status alone (metadata, a label) keeps its rows: deleting and
    inserting them again cost statements and index writes in every claims batch.
    """
    return entry.created or entry.item.stored.get(STORED_STATUS) != entry.item.obj.get("status")


def claims_written(written: list[Written], result: BatchResult) -> None:
    """Replace the allocated devices and reservations of the written claims whose status
    changed, at once."""
    rewritten = [entry for entry in written if children_changed(entry)]
    updated = [entry.row.pk for entry in rewritten if not entry.created]
    for part in chunks(updated):
        AllocatedDevice.objects.filter(claim_id__in=part).delete()
        Reservation.objects.filter(claim_id__in=part).delete()
    devices: list[AllocatedDevice] = []
    reservations: list[Reservation] = []
    for entry in rewritten:
        allocated, reserved = entry.item.children
        devices.extend(
            new_row(AllocatedDevice, claim_id=entry.row.pk, **columns) for columns in allocated
        )
        reservations.extend(Reservation(claim_id=entry.row.pk, **columns) for columns in reserved)
    for entry in written:
        allocated = entry.item.children[0]
        result.upserted += 1
        result.touch("claims", entry.row.pk)
        result.touch("devices", *(f"{c['driver']}/{c['pool']}/{c['device']}" for c in allocated))
        if not entry.created:
            # The row carries the written columns only: without the stored template name,
            # every updated claim would be written a second time to set the name it has.
            entry.row.template_name = entry.item.stored.get("template_name", "")
    insert_rows(AllocatedDevice, devices)
    insert_rows(Reservation, reservations)
    link_templates([entry.row for entry in written])


def delete_claims(rows: list[Any], result: BatchResult) -> None:
    pks = [row.pk for row in rows]
    result.touch("claims", *pks)
    for part in chunks(pks):
        held = AllocatedDevice.objects.filter(claim_id__in=part).values_list(
            "driver", "pool", "device"
        )
        result.touch("devices", *(f"{driver}/{pool}/{device}" for driver, pool, device in held))
    delete_rows(rows)


def template_columns(obj: JSON) -> JSON:
    return {"device_classes": device_classes_of(((obj.get("spec") or {}).get("spec")) or {})}


def quota_columns(obj: JSON) -> JSON:
    status = obj.get("status") or {}
    return {
        "hard": status.get("hard") or (obj.get("spec") or {}).get("hard") or {},
        "used": status.get("used") or {},
    }


def priority_class_columns(obj: JSON) -> JSON:
    value = obj.get("value")
    return {
        "value": value if isinstance(value, int) else 0,
        "global_default": obj.get("globalDefault") is True,
        "preemption_policy": str(obj.get("preemptionPolicy") or ""),
    }


def budget_columns(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    return {
        "selector": spec.get("selector"),
        "min_available": "" if spec.get("minAvailable") is None else str(spec["minAvailable"]),
        "max_unavailable": ""
        if spec.get("maxUnavailable") is None
        else str(spec["maxUnavailable"]),
        "disruptions_allowed": allowed if isinstance(allowed, int) else 0,
        "disrupted_pods": sorted(status.get("disruptedPods") or {}),
    }


def limit_range_columns(obj: JSON) -> JSON:
    return {"limits": (obj.get("spec") or {}).get("limits") or []}


def scheduling_context_columns(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    return {
        "selected_node": str(spec.get("selectedNode") or ""),
        "potential_nodes": spec.get("potentialNodes") or [],
    }


# Changes that can alter whether a waiting claim fits.
DIAGNOSIS_TOPICS = frozenset({"claims", "pods", "slices", "devices", "nodes", "classes", "pools"})


def changes_diagnoses(result: BatchResult) -> bool:
    """Whether a committed batch changed something that can alter whether a waiting claim fits."""
    return bool(DIAGNOSIS_TOPICS.intersection(result.changed))


def register_handlers(*, diagnoses_stale: Callable[[], object]) -> None:
    """Register the claims kinds with the sync; call `diagnoses_stale()` after each batch that
    can change a pending claim's diagnosis (the app wires in the Celery side)."""

    def after_commit(result: BatchResult) -> None:
        if changes_diagnoses(result):
            diagnoses_stale()

    AFTER_COMMIT.append(after_commit)
    AFTER_COMMIT.append(forget_dra_extended_names)
    register(
        KindHandler(
            Kind.RESOURCE_CLAIM,
            ResourceClaim,
            claim_columns,
            delete_claims,
            "claims",
            namespaced=True,
            stored_fields=("template_name",),
            children=claim_children,
            prepare=stored_status,
            written=claims_written,
        )
    )
    register(
        KindHandler(
            Kind.RESOURCE_CLAIM_TEMPLATE,
            ResourceClaimTemplate,
            template_columns,
            delete_row("templates"),
            "templates",
            namespaced=True,
        )
    )
    register(
        KindHandler(
            Kind.POD,
            PodModel,
            pod_columns,
            delete_row("pods"),
            "pods",
            namespaced=True,
            stored_fields=("resource_claims",),
            redact=redact_pod,
            written=pods_written,
            export=export_pods,
        )
    )
    register(
        KindHandler(
            Kind.RESOURCE_QUOTA,
            ResourceQuota,
            quota_columns,
            delete_row("quotas"),
            "quotas",
            namespaced=True,
        )
    )
    register(
        KindHandler(
            Kind.LIMIT_RANGE,
            LimitRange,
            limit_range_columns,
            delete_row("quotas"),
            "quotas",
            namespaced=True,
        )
    )
    # What preemption reads: priorities and budgets (their live topic is the quotas').
    register(
        KindHandler(
            Kind.PRIORITY_CLASS,
            PriorityClass,
            priority_class_columns,
            delete_row("quotas"),
            "quotas",
        )
    )
    register(
        KindHandler(
            Kind.POD_DISRUPTION_BUDGET,
            PodDisruptionBudget,
            budget_columns,
            delete_row("quotas"),
            "quotas",
            namespaced=True,
        )
    )
    register(
        KindHandler(
            Kind.POD_SCHEDULING_CONTEXT,
            PodSchedulingContext,
            scheduling_context_columns,
            delete_row("pods"),
            "pods",
            namespaced=True,
        )
    )
