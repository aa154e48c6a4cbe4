"""Pages of what asks for devices: claims, claim templates, pods, classic
PodSchedulingContexts and quotas.

Each list is `list_page` over its FilterSet (or a fixed set of grouped queries), so it runs a
fixed number of queries whatever the cluster size; quota lines and template use come from
`claims.pages`.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from claims.choices import ClaimState
from claims.devices.pages import consumers_by_claim
from claims.events import events_about
from claims.filters import (
    PodFilterSet,
    PodSchedulingContextFilterSet,
    ResourceClaimFilterSet,
    ResourceClaimTemplateFilterSet,
    ResourceQuotaFilterSet,
)
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from claims.pages import duration_text, other_quota_rows, quota_rows, template_claim_counts
from claims.templates import template_names
from claims.views.missing import not_found
from claims.whatif.diagnosis import diagnose_claim
from dashboard.views import (
    apply_filters,
    apply_ordering,
    given_filters,
    list_page,
    object_yaml,
    paginate,
    read_access,
    render_page,
    yaml_download,
)
from inventory.models import Device
from inventory.visibility import (
    Visibility,
    hide_other_namespaces,
    scope_namespaced,
    visibility_for,
)

CLAIM_ORDERING = {
    "namespace": "namespace",
    "name": "name",
    "state": "state",
    "node": "node_name",
    "devices": "allocated_count",
    "age": "created_at",
}
NAMESPACED_ORDERING = {"namespace": "namespace", "name": "name", "age": "created_at"}


def _namespaces(model: type[Any], seen: Visibility) -> list[str]:
    """The namespace filter's choices: those of the model's rows the person may see."""
    rows = scope_namespaced(model.objects.order_by("namespace"), seen)
    return list(rows.values_list("namespace", flat=True).distinct())


def _yaml_context(raw: Any, name: str) -> dict[str, Any]:
    return {"raw_yaml": object_yaml(raw), "yaml_name": name}


def _events_context(
    namespace: str, *, claims: list[str] | None = None, pods: list[str], many: bool = False
) -> dict[str, Any]:
    return {
        "events": events_about(namespace, claims=claims or [], pods=pods),
        "events_about_many": many,
        "events_ttl": duration_text(settings.EVENTS_TTL_SECONDS),
    }


@read_access
def claim_list(request: HttpRequest) -> HttpResponse:
    seen = visibility_for(request)
    claims, params, errors = apply_filters(
        request,
        ResourceClaimFilterSet,
        scope_namespaced(ResourceClaim.objects.order_by("namespace", "name"), seen),
    )
    if not errors:
        claims, errors = apply_ordering(request, claims, CLAIM_ORDERING)
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
    others = given_filters(request)
    others.pop("state", None)
    by_state = dict(
        ResourceClaimFilterSet(others, queryset=scope_namespaced(ResourceClaim.objects.all(), seen))
        .qs.values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    consumers = consumers_by_claim(claim.pk for claim in page.object_list)
    context: dict[str, Any] = {
        "page_obj": page,
        "params": params,
        "errors": errors,
        # Each claim with the pods (and other consumers) it is reserved for.
        "rows": [(claim, consumers.get(claim.pk, [])) for claim in page.object_list],
        "namespaces": _namespaces(ResourceClaim, seen),
        "states": ClaimState.choices,
        "by_state": [(value, label, by_state.get(value, 0)) for value, label in ClaimState.choices],
    }
    # A namespace the person may not see has nothing to follow (its topic would be refused).
    scoped = params["namespace"] and seen.allows(params["namespace"])
    live = [f"namespace:{params['namespace']}"] if scoped else ["claims"]
    return render_page(
        request,
        template="claims/claim_list.html",
        context=context,
        fragments={"table": "claims/_claim_table.html"},
        live=live,
    )


def published_devices(entries: list[AllocatedDevice]) -> set[str]:
    """The `driver/pool/device` keys of allocation results that a current slice publishes
    (one query): the others are shown without a link."""
    if not entries:
        return set()
    wanted = Q()
    for entry in entries:
        wanted |= Q(driver=entry.driver, pool_name=entry.pool, name=entry.device)
    rows = Device.objects.filter(wanted, current=True).values_list("driver", "pool_name", "name")
    return {f"{driver}/{pool}/{name}" for driver, pool, name in rows}


@read_access
def claim_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    claim = (
        ResourceClaim.objects.prefetch_related("allocated_devices", "reservations")
        .filter(namespace=namespace, name=name)
        .first()
    )
    # Another namespace's claim is answered as one that does not exist.
    if claim is None or not visibility_for(request).allows(namespace):
        return not_found(
            request, kind="ResourceClaim", name=f"{namespace}/{name}", listing=reverse("claim-list")
        )
    allocated = list(claim.allocated_devices.all())
    published = published_devices(allocated)
    devices = [(entry, entry.key in published) for entry in allocated]
    download = yaml_download(request, raw=claim.raw, filename=f"{namespace}-{name}")
    if download is not None:
        return download
    reservations = list(claim.reservations.all())
    if claim.state == ClaimState.PENDING:
        # Made now when none was made on the current cluster state (within the diagnosis
        # budget, once however many open it together); stored, so the next opening reads it.
        made = diagnose_claim(namespace, name)
        if made is not None and made != claim.diagnosis:
            claim.diagnosis = made
            claim.refresh_from_db(fields=["diagnosed_at"])
    # Holders in other namespaces are said to be there, never named.
    diagnosis = claim.diagnosis if isinstance(claim.diagnosis, dict) else None
    diagnosis = hide_other_namespaces(diagnosis, visibility_for(request))
    waiting = [str(p) for p in (diagnosis or {}).get("pods") or []]
    wanted = {r.name for r in reservations} | set(waiting) | {claim.owner_pod} - {""}
    pods = {pod.name: pod for pod in Pod.objects.filter(namespace=namespace, name__in=wanted)}
    spec = (claim.obj or {}).get("spec") or {}
    context = {
        "claim": claim,
        # Through the owning pod, so a claim stored before its pod still names its template.
        "template_name": template_names([claim]).get(claim.pk, claim.template_name),
        "devices": devices,
        "reservations": [(r, pods.get(r.name)) for r in reservations],
        "requests": (spec.get("devices") or {}).get("requests") or [],
        "diagnosis": diagnosis,
        "diagnosis_json": json.dumps(diagnosis, indent=2) if diagnosis else "",
        "waiting_pods": [
            (pod_name, pods.get(pod_name))
            for pod_name in (waiting or [claim.owner_pod])
            if pod_name
        ],
        "owner": pods.get(claim.owner_pod),
        # The claim's own events and its pods' (the scheduler speaks of the pod).
        **_events_context(namespace, claims=[name], pods=sorted(wanted), many=True),
        "raw_yaml": object_yaml(claim.raw),
        "yaml_name": f"{namespace}-{name}",
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
        queryset=scope_namespaced(
            ResourceClaimTemplate.objects.only(
                "pk", "namespace", "name", "device_classes", "created_at", "obj"
            ),
            visibility_for(request),
        ),
        template="claims/template_list.html",
        fragment="claims/_template_table.html",
        live=["templates"],
        rows=template_claim_counts,
        ordering=NAMESPACED_ORDERING,
        context={"namespaces": _namespaces(ResourceClaimTemplate, visibility_for(request))},
    )


@read_access
def template_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    template = ResourceClaimTemplate.objects.filter(namespace=namespace, name=name).first()
    if template is None or not visibility_for(request).allows(namespace):
        return not_found(
            request,
            kind="ResourceClaimTemplate",
            name=f"{namespace}/{name}",
            listing=reverse("template-list"),
        )
    download = yaml_download(request, raw=template.raw, filename=f"{namespace}-{name}")
    if download is not None:
        return download
    claims = ResourceClaim.objects.filter(namespace=namespace, template_name=name).only(
        "pk", "namespace", "name", "state", "node_name", "created_at"
    )
    context = {
        "template": template,
        "page_obj": paginate(request, claims.order_by("name")),
        **_yaml_context(template.raw, f"{namespace}-{name}"),
    }
    return render_page(
        request,
        template="claims/template_detail.html",
        context=context,
        live=[f"namespace:{namespace}"],
    )


@read_access
def pod_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PodFilterSet,
        queryset=scope_namespaced(
            Pod.objects.order_by("namespace", "name").only(
                "pk", "namespace", "name", "phase", "node_name", "resource_claims", "created_at"
            ),
            visibility_for(request),
        ),
        template="claims/pod_list.html",
        fragment="claims/_pod_table.html",
        live=["pods"],
        ordering={**NAMESPACED_ORDERING, "phase": "phase", "node": "node_name"},
        context={
            "namespaces": _namespaces(Pod, visibility_for(request)),
            "phases": ["Pending", "Running", "Succeeded", "Failed", "Unknown"],
        },
    )


@read_access
def pod_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    pod = Pod.objects.filter(namespace=namespace, name=name).first()
    if pod is None or not visibility_for(request).allows(namespace):
        return not_found(
            request, kind="pod", name=f"{namespace}/{name}", listing=reverse("pod-list")
        )
    download = yaml_download(request, raw=pod.raw, filename=f"{namespace}-{name}")
    if download is not None:
        return download
    generated = {
        str(s.get("name")): str(s.get("resourceClaimName") or "") for s in pod.claim_statuses or []
    }
    entries = []
    for entry in pod.resource_claims or []:
        entry_name = str(entry.get("name") or "")
        claim = entry.get("resourceClaimName") or generated.get(entry_name) or ""
        entries.append(
            {
                "name": entry_name,
                "claim": claim,
                "template": entry.get("resourceClaimTemplateName") or "",
            }
        )
    claims = {
        c.name: c
        for c in ResourceClaim.objects.filter(
            namespace=namespace, name__in=[e["claim"] for e in entries if e["claim"]]
        ).only("pk", "namespace", "name", "state")
    }
    context = {
        "pod": pod,
        "entries": [(e, claims.get(e["claim"])) for e in entries],
        **_events_context(namespace, pods=[name]),
        **_yaml_context(pod.raw, f"{namespace}-{name}"),
    }
    return render_page(
        request,
        template="claims/pod_detail.html",
        context=context,
        fragments={"events": "claims/_pod_events.html"},
        live=[f"namespace:{namespace}"],
    )


def _scheduling_rows(contexts: list[PodSchedulingContext]) -> list[dict[str, Any]]:
    rows = []
    for context in contexts:
        status = (context.obj or {}).get("status") or {}
        unsuitable = {
            str(entry.get("name")): [str(n) for n in entry.get("unsuitableNodes") or []]
            for entry in status.get("resourceClaims") or []
        }
        rows.append(
            {
                "context": context,
                "potential": [str(n) for n in context.potential_nodes or []],
                "unsuitable": unsuitable,
            }
        )
    return rows


@read_access
def scheduling_context_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PodSchedulingContextFilterSet,
        queryset=scope_namespaced(
            PodSchedulingContext.objects.order_by("namespace", "name"), visibility_for(request)
        ),
        template="claims/scheduling_context_list.html",
        fragment="claims/_scheduling_context_table.html",
        live=["pods"],
        rows=_scheduling_rows,
        ordering={**NAMESPACED_ORDERING, "node": "selected_node"},
        context={"namespaces": _namespaces(PodSchedulingContext, visibility_for(request))},
    )


@read_access
def quota_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=ResourceQuotaFilterSet,
        queryset=scope_namespaced(
            ResourceQuota.objects.only("pk", "namespace", "name", "hard", "used"),
            visibility_for(request),
        ),
        template="claims/quota_list.html",
        fragment="claims/_quota_table.html",
        live=["quotas"],
        rows=lambda quotas: [
            (quota, quota_rows(quota), other_quota_rows(quota)) for quota in quotas
        ],
        context={"namespaces": _namespaces(ResourceQuota, visibility_for(request))},
    )
