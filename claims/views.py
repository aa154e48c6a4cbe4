"""Pages for claims, claim templates and quotas: views translate requests into queries only."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.choices import ClaimState
from claims.filters import (
    ResourceClaimFilterSet,
    ResourceClaimTemplateFilterSet,
    ResourceQuotaFilterSet,
)
from claims.models import (
    AllocatedDevice,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from claims.services import quota_rows, template_claim_counts
from dashboard.views import (
    apply_filters,
    distinct_values,
    list_page,
    paginate,
    read_access,
    render_page,
)
from inventory.models import Device


@read_access
def claim_list(request: HttpRequest) -> HttpResponse:
    claims, params, errors = apply_filters(
        request, ResourceClaimFilterSet, ResourceClaim.objects.order_by("namespace", "name")
    )
    claims = claims.annotate(reservation_count=Count("reservations"))
    page = paginate(
        request,
        claims.only(
            "pk",
            "namespace",
            "name",
            "state",
            "classic",
            "node_name",
            "device_classes",
            "request_count",
            "allocated_count",
            "owner_pod",
            "diagnosis",
            "created_at",
        ),
    )
    # Tab counts: the same filters without the state one.
    others = request.GET.copy()
    others.pop("state", None)
    by_state = dict(
        ResourceClaimFilterSet(others, queryset=ResourceClaim.objects.all())
        .qs.values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    context: dict[str, Any] = {
        "page_obj": page,
        "params": params,
        "errors": errors,
        "namespaces": distinct_values(ResourceClaim, "namespace"),
        "states": ClaimState.choices,
        "by_state": [(value, label, by_state.get(value, 0)) for value, label in ClaimState.choices],
    }
    live = ["claims"] if not params["namespace"] else [f"namespace:{params['namespace']}"]
    return render_page(
        request,
        template="claims/claim_list.html",
        context=context,
        fragments={"table": "claims/_claim_table.html"},
        live=live,
    )


def device_ids_for(entries: list[AllocatedDevice]) -> dict[str, int]:
    """Map `driver/pool/device` keys of allocation results to current Device ids (one query)."""
    if not entries:
        return {}
    wanted = Q()
    for entry in entries:
        wanted |= Q(driver=entry.driver, pool_name=entry.pool, name=entry.device)
    rows = Device.objects.filter(wanted, current=True).values_list(
        "pk", "driver", "pool_name", "name"
    )
    return {f"{driver}/{pool}/{name}": pk for pk, driver, pool, name in rows}


@read_access
def claim_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    claim = get_object_or_404(
        ResourceClaim.objects.prefetch_related("allocated_devices", "reservations"),
        namespace=namespace,
        name=name,
    )
    allocated = list(claim.allocated_devices.all())
    ids = device_ids_for(allocated)
    devices = [(entry, ids.get(entry.key)) for entry in allocated]
    reservations = list(claim.reservations.all())
    pods = {
        pod.name: pod
        for pod in Pod.objects.filter(namespace=namespace, name__in=[r.name for r in reservations])
    }
    spec = (claim.obj or {}).get("spec") or {}
    context = {
        "claim": claim,
        "devices": devices,
        "reservations": [(r, pods.get(r.name)) for r in reservations],
        "requests": (spec.get("devices") or {}).get("requests") or [],
        "diagnosis": claim.diagnosis,
        "diagnosis_json": json.dumps(claim.diagnosis, indent=2) if claim.diagnosis else "",
        "spec_json": json.dumps(claim.obj, indent=2, sort_keys=True),
    }
    return render_page(
        request,
        template="claims/claim_detail.html",
        context=context,
        fragments={"body": "claims/_claim_body.html"},
        live=[f"namespace:{namespace}"],
    )


@read_access
def template_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=ResourceClaimTemplateFilterSet,
        queryset=ResourceClaimTemplate.objects.only(
            "pk", "namespace", "name", "device_classes", "created_at", "obj"
        ),
        template="claims/template_list.html",
        fragment="claims/_template_table.html",
        live=["templates"],
        rows=template_claim_counts,
        context={"namespaces": distinct_values(ResourceClaimTemplate, "namespace")},
    )


@read_access
def quota_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=ResourceQuotaFilterSet,
        queryset=ResourceQuota.objects.only("pk", "namespace", "name", "hard", "used"),
        template="claims/quota_list.html",
        fragment="claims/_quota_table.html",
        live=["quotas"],
        rows=lambda quotas: [(quota, quota_rows(quota)) for quota in quotas],
        context={"namespaces": distinct_values(ResourceQuota, "namespace")},
    )
