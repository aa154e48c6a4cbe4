"""Pages for claims, claim templates and quotas: views translate requests into queries only."""

from __future__ import annotations

import json
from collections import defaultdict
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
from dashboard.views import apply_filters, paginate, percent, read_access, render_page
from inventory.models import Device

# Quota keys for DRA look like `<class>.deviceclass.resource.k8s.io/devices`.
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def _namespaces() -> list[str]:
    return list(
        ResourceClaim.objects.order_by("namespace").values_list("namespace", flat=True).distinct()
    )


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
        "namespaces": _namespaces(),
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
    templates, params, errors = apply_filters(
        request,
        ResourceClaimTemplateFilterSet,
        ResourceClaimTemplate.objects.only(
            "pk", "namespace", "name", "device_classes", "created_at", "obj"
        ),
    )
    page = paginate(request, templates)
    claims_from = defaultdict(int)
    names = [t.name for t in page.object_list]
    for ns, template_name, n in (
        ResourceClaim.objects.filter(template_name__in=names)
        .values_list("namespace", "template_name")
        .annotate(n=Count("pk"))
        .values_list("namespace", "template_name", "n")
    ):
        claims_from[(ns, template_name)] = n
    rows = [(t, claims_from.get((t.namespace, t.name), 0)) for t in page.object_list]
    context = {
        "page_obj": page,
        "rows": rows,
        "params": params,
        "errors": errors,
        "namespaces": list(
            ResourceClaimTemplate.objects.order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        ),
    }
    return render_page(
        request,
        template="claims/template_list.html",
        context=context,
        fragments={"table": "claims/_template_table.html"},
        live=["templates"],
    )


def quota_rows(quota: ResourceQuota) -> list[dict[str, Any]]:
    """The device-class lines of one ResourceQuota: class, used, hard and the fraction used."""
    rows = []
    for key, hard in sorted((quota.hard or {}).items()):
        if not key.endswith(DEVICE_CLASS_QUOTA_SUFFIX):
            continue
        used = (quota.used or {}).get(key, "0")
        try:
            used_n, hard_n = int(str(used)), int(str(hard))
        except ValueError:
            used_n, hard_n = 0, 0
        rows.append(
            {
                "device_class": key.removesuffix(DEVICE_CLASS_QUOTA_SUFFIX),
                "key": key,
                "used": used,
                "hard": hard,
                "percent": min(100.0, percent(used_n, hard_n)),
                "full": hard_n > 0 and used_n >= hard_n,
            }
        )
    return rows


@read_access
def quota_list(request: HttpRequest) -> HttpResponse:
    quotas, params, errors = apply_filters(
        request,
        ResourceQuotaFilterSet,
        ResourceQuota.objects.only("pk", "namespace", "name", "hard", "used"),
    )
    page = paginate(request, quotas)
    rows = [(quota, quota_rows(quota)) for quota in page.object_list]
    context = {
        "page_obj": page,
        "rows": rows,
        "params": params,
        "errors": errors,
        "namespaces": list(
            ResourceQuota.objects.order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        ),
    }
    return render_page(
        request,
        template="claims/quota_list.html",
        context=context,
        fragments={"table": "claims/_quota_table.html"},
        live=["quotas"],
    )
