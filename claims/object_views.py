"""Pages for devices, DeviceClasses, DeviceTaintRules, classic ResourceClasses and
PodSchedulingContexts, pods that use claims, and a search by name across kinds.

Each list is `list_page` over its FilterSet, so it runs a fixed number of queries.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.devices.classes import class_membership, class_utilisation
from claims.devices.states import annotate_device_state, refine_device_states
from claims.filters import DeviceFilterSet, PodFilterSet, PodSchedulingContextFilterSet
from claims.models import Pod, PodSchedulingContext, ResourceClaim, ResourceClaimTemplate
from dashboard.views import (
    apply_ordering,
    distinct_values,
    list_page,
    object_yaml,
    paginate,
    read_access,
    render_page,
    yaml_download,
)
from inventory.choices import DeviceState
from inventory.filters import DeviceClassFilterSet, DeviceTaintRuleFilterSet, ResourceClassFilterSet
from inventory.models import Device, DeviceClass, DeviceTaintRule, Node, ResourceClass

DEVICE_COLUMNS = (
    "pk",
    "driver",
    "pool_name",
    "pool_id",
    "name",
    "node_name",
    "all_nodes",
    "consumes_counters",
    "taints",
    "allow_multiple_allocations",
    "current",
)
SEARCH_LIMIT = 20
NAME_ORDERING = {"name": "name", "age": "created_at"}
DEVICE_ORDERING = {"driver": "driver", "pool": "pool_name", "name": "name", "state": "state"}
NAMESPACED_ORDERING = {"namespace": "namespace", **NAME_ORDERING}


def _refined(devices: list[Device]) -> list[Device]:
    refine_device_states(devices)
    return devices


def _yaml_context(raw: Any, name: str) -> dict[str, Any]:
    return {"raw_yaml": object_yaml(raw), "yaml_name": name}


@read_access
def device_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=DeviceFilterSet,
        queryset=annotate_device_state(
            Device.objects.filter(current=True).only(*DEVICE_COLUMNS)
        ).order_by("driver", "pool_name", "name"),
        template="claims/device_list.html",
        fragment="claims/_device_table.html",
        live=["devices", "pools"],
        rows=_refined,
        context={"drivers": distinct_values(Device, "driver"), "states": DeviceState.choices},
        ordering=DEVICE_ORDERING,
    )


def _class_rows(classes: list[DeviceClass]) -> list[tuple[DeviceClass, dict[str, Any] | None]]:
    report = {entry["name"]: entry for entry in class_utilisation()["classes"]}
    return [(c, report.get(c.name)) for c in classes]


@read_access
def device_class_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=DeviceClassFilterSet,
        queryset=DeviceClass.objects.order_by("name").only(
            "pk", "name", "selectors", "created_at", "extended_resource_name"
        ),
        template="claims/device_class_list.html",
        fragment="claims/_device_class_table.html",
        live=["classes", "devices"],
        rows=_class_rows,
        ordering=NAME_ORDERING,
    )


@read_access
def device_class_detail(request: HttpRequest, name: str) -> HttpResponse:
    device_class = get_object_or_404(DeviceClass, name=name)
    download = yaml_download(request, raw=device_class.raw, filename=name)
    if download is not None:
        return download
    membership = class_membership()
    members = membership.members.get(name)
    devices = annotate_device_state(
        Device.objects.filter(pk__in=sorted(members or ())).only(*DEVICE_COLUMNS)
    ).order_by("driver", "pool_name", "name")
    devices, errors = apply_ordering(request, devices, DEVICE_ORDERING)
    page = paginate(request, devices)
    context = {
        "device_class": device_class,
        "errors": errors,
        "page_obj": page,
        "rows": _refined(list(page.object_list)),
        "compiled": members is not None,
        "error": membership.errors.get(name),
        "cel_errors": membership.cel_errors.get(name, 0),
        **_yaml_context(device_class.raw, name),
    }
    return render_page(
        request,
        template="claims/device_class_detail.html",
        context=context,
        fragments={"table": "claims/_device_table.html"},
        live=["classes", "devices"],
    )


@read_access
def taint_rule_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=DeviceTaintRuleFilterSet,
        queryset=DeviceTaintRule.objects.order_by("name"),
        template="claims/taint_rule_list.html",
        fragment="claims/_taint_rule_table.html",
        live=["devices"],
        ordering={**NAME_ORDERING, "driver": "driver"},
    )


@read_access
def resource_class_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=ResourceClassFilterSet,
        queryset=ResourceClass.objects.order_by("name"),
        template="claims/resource_class_list.html",
        fragment="claims/_resource_class_table.html",
        live=["classes"],
        ordering={**NAME_ORDERING, "driver": "driver_name"},
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
        queryset=PodSchedulingContext.objects.order_by("namespace", "name"),
        template="claims/scheduling_context_list.html",
        fragment="claims/_scheduling_context_table.html",
        live=["pods"],
        rows=_scheduling_rows,
        ordering={**NAMESPACED_ORDERING, "node": "selected_node"},
        context={"namespaces": distinct_values(PodSchedulingContext, "namespace")},
    )


@read_access
def pod_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PodFilterSet,
        queryset=Pod.objects.order_by("namespace", "name").only(
            "pk", "namespace", "name", "phase", "node_name", "resource_claims", "created_at"
        ),
        template="claims/pod_list.html",
        fragment="claims/_pod_table.html",
        live=["pods"],
        ordering={**NAMESPACED_ORDERING, "phase": "phase", "node": "node_name"},
        context={
            "namespaces": distinct_values(Pod, "namespace"),
            "phases": ["Pending", "Running", "Succeeded", "Failed", "Unknown"],
        },
    )


@read_access
def pod_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    pod = get_object_or_404(Pod, namespace=namespace, name=name)
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
        **_yaml_context(pod.raw, f"{namespace}-{name}"),
    }
    return render_page(
        request,
        template="claims/pod_detail.html",
        context=context,
        fragments={},
        live=[f"namespace:{namespace}"],
    )


@read_access
def search(request: HttpRequest) -> HttpResponse:
    """Objects of every kind whose name contains `q`, a few per kind."""
    text = request.GET.get("q", "").strip()
    results: list[tuple[str, list[Any], str]] = []
    if text:
        contains = Q(name__icontains=text)
        kinds: list[tuple[str, Any, str]] = [
            ("Nodes", Node.objects.filter(contains).only("pk", "name"), "node-list"),
            ("ResourceClaims", ResourceClaim.objects.filter(contains), "claim-list"),
            ("ResourceClaimTemplates", ResourceClaimTemplate.objects.filter(contains), ""),
            ("Pods", Pod.objects.filter(contains), "pod-list"),
            ("DeviceClasses", DeviceClass.objects.filter(contains), "device-class-list"),
            ("Devices", Device.objects.filter(contains, current=True), "device-list"),
            ("DeviceTaintRules", DeviceTaintRule.objects.filter(contains), "taint-rule-list"),
        ]
        for label, queryset, list_name in kinds:
            found = list(queryset.order_by("name")[: SEARCH_LIMIT + 1])
            if found:
                results.append(
                    (label, found[:SEARCH_LIMIT], list_name if len(found) > SEARCH_LIMIT else "")
                )
    return render_page(
        request,
        template="claims/search.html",
        context={"q": text, "results": results, "limit": SEARCH_LIMIT},
    )


@read_access
def template_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    template = get_object_or_404(ResourceClaimTemplate, namespace=namespace, name=name)
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
