"""Pages for pools, devices, nodes, claims, claim templates and quotas.

Views translate requests into queries, nothing more. Device states, counts, grids and
reachability come from `claims.devices` (SQL annotations and grouped queries), so every list page
is a fixed number of queries whatever the cluster size.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.choices import ClaimState
from claims.devices.counts import pool_utilisation
from claims.devices.pages import (
    matching_taint_rules,
    pool_context,
    pool_segments,
    pool_status_entry,
    reachable_counts,
)
from claims.devices.states import HELD_STATES, annotate_device_state, refine_device_states
from claims.devices.usage import capacity_usage
from claims.filters import (
    ResourceClaimFilterSet,
    ResourceClaimTemplateFilterSet,
    ResourceQuotaFilterSet,
)
from claims.models import (
    AllocatedDevice,
    Pod,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from claims.pages import other_quota_rows, quota_rows, template_claim_counts
from claims.templates import template_names
from dashboard.views import (
    apply_filters,
    apply_ordering,
    distinct_values,
    given_filters,
    list_page,
    object_yaml,
    paginate,
    read_access,
    render_page,
    yaml_download,
)
from dralib.allocator.pools import NodeInfo, NodeSelector
from inventory.filters import NodeFilterSet, PoolFilterSet
from inventory.models import Device, Node, Pool, ResourceSlice

CLAIM_ORDERING = {
    "namespace": "namespace",
    "name": "name",
    "state": "state",
    "node": "node_name",
    "devices": "allocated_count",
    "age": "created_at",
}
NAMESPACED_ORDERING = {"namespace": "namespace", "name": "name", "age": "created_at"}


@read_access
def claim_list(request: HttpRequest) -> HttpResponse:
    claims, params, errors = apply_filters(
        request, ResourceClaimFilterSet, ResourceClaim.objects.order_by("namespace", "name")
    )
    if not errors:
        claims, errors = apply_ordering(request, claims, CLAIM_ORDERING)
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
    others = given_filters(request)
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
    download = yaml_download(request, raw=claim.raw, filename=f"{namespace}-{name}")
    if download is not None:
        return download
    reservations = list(claim.reservations.all())
    diagnosis = claim.diagnosis if isinstance(claim.diagnosis, dict) else None
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
        "diagnosis_json": json.dumps(claim.diagnosis, indent=2) if claim.diagnosis else "",
        "waiting_pods": [
            (pod_name, pods.get(pod_name))
            for pod_name in (waiting or [claim.owner_pod])
            if pod_name
        ],
        "owner": pods.get(claim.owner_pod),
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
        queryset=ResourceClaimTemplate.objects.only(
            "pk", "namespace", "name", "device_classes", "created_at", "obj"
        ),
        template="claims/template_list.html",
        fragment="claims/_template_table.html",
        live=["templates"],
        rows=template_claim_counts,
        ordering=NAMESPACED_ORDERING,
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
        rows=lambda quotas: [
            (quota, quota_rows(quota), other_quota_rows(quota)) for quota in quotas
        ],
        context={"namespaces": distinct_values(ResourceQuota, "namespace")},
    )


@read_access
def pool_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PoolFilterSet,
        queryset=pool_utilisation(Pool.objects.all()),
        template="claims/pool_list.html",
        fragment="claims/_pool_table.html",
        live=["pools"],
        rows=lambda pools: [(pool, pool_segments(pool)) for pool in pools],
        ordering={
            "driver": "driver",
            "name": "name",
            "node": "node_name",
            "devices": "devices_total",
            "allocated": "devices_allocated",
            "free": "devices_free",
        },
        context={"drivers": distinct_values(Pool, "driver")},
    )


@read_access
def pool_detail(request: HttpRequest, pk: int) -> HttpResponse:
    pool = get_object_or_404(Pool, pk=pk)
    context = pool_context(pool)
    context["pool_status"] = pool_status_entry(pool, context["grid"], context["counts"])
    context["slices"] = list(
        ResourceSlice.objects.filter(pool=pool)
        .annotate(n_devices=Count("devices"))
        .only("pk", "name", "generation", "current", "node_name", "all_nodes", "node_selector")
        .order_by("-generation", "name")
    )
    return render_page(
        request,
        template="claims/pool_detail.html",
        context=context,
        fragments={"body": "claims/_pool_body.html"},
        live=[f"pool:{pool.pk}"],
    )


@read_access
def device_detail(request: HttpRequest, pk: int) -> HttpResponse:
    device = get_object_or_404(
        annotate_device_state(Device.objects.select_related("pool", "slice")), pk=pk
    )
    download = yaml_download(request, raw=device.slice.raw, filename=device.slice.name)
    if download is not None:
        return download
    refine_device_states([device])
    holders = list(
        AllocatedDevice.objects.filter(
            driver=device.driver, pool=device.pool_name, device=device.name
        ).select_related("claim")
    )
    claim_ids = {h.claim_id for h in holders}
    reservations: dict[int, list[Reservation]] = defaultdict(list)
    for reservation in Reservation.objects.filter(claim_id__in=claim_ids):
        reservations[reservation.claim_id].append(reservation)
    context = {
        "device": device,
        "holders": [(h, reservations.get(h.claim_id, [])) for h in holders],
        "capacity": capacity_usage(device),
        "rules": matching_taint_rules(device),
        "attributes": sorted((device.attributes or {}).items()),
        "spec_json": json.dumps(device.spec, indent=2, sort_keys=True),
        "raw_yaml": object_yaml(device.slice.raw),
        "yaml_name": device.slice.name,
        "yaml_title": f"Its ResourceSlice {device.slice.name}",
    }
    return render_page(
        request,
        template="claims/device_detail.html",
        context=context,
        fragments={"body": "claims/_device_body.html"},
        live=[f"pool:{device.pool_id}"],
    )


@read_access
def node_list(request: HttpRequest) -> HttpResponse:
    nodes, params, errors = apply_filters(
        request,
        NodeFilterSet,
        Node.objects.only("pk", "name", "ready", "unschedulable", "labels", "created_at"),
    )
    if not errors:
        nodes, errors = apply_ordering(request, nodes, {"name": "name", "age": "created_at"})
    params["label"] = request.GET.get("label", "").strip()
    if params["label"]:
        key, _, value = params["label"].partition("=")
        nodes = (
            nodes.filter(labels__has_key=key)
            if not value
            else nodes.filter(**{f"labels__{key}": value})
        )
    page = paginate(request, nodes)
    counts = reachable_counts(list(page.object_list))
    claims_on = dict(
        ResourceClaim.objects.filter(node_name__in=[n.name for n in page.object_list])
        .values_list("node_name")
        .annotate(n=Count("pk"))
        .values_list("node_name", "n")
    )
    rows = [(node, counts[node.name], claims_on.get(node.name, 0)) for node in page.object_list]
    return render_page(
        request,
        template="claims/node_list.html",
        context={"page_obj": page, "rows": rows, "params": params, "errors": errors},
        fragments={"table": "claims/_node_table.html"},
        live=["nodes", "devices", "claims"],
    )


@read_access
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    download = yaml_download(request, raw=node.raw, filename=name)
    if download is not None:
        return download
    counts = reachable_counts([node])[node.name]
    local_pools = pool_utilisation(Pool.objects.filter(node_name=name))
    info = NodeInfo(name=node.name, labels=dict(node.labels or {}))
    shared_pools = []
    for pool in pool_utilisation(Pool.objects.filter(node_name="")):
        selectors = {
            json.dumps(s, sort_keys=True)
            for s in pool.slices.filter(current=True).values_list("node_selector", flat=True)
        }
        reach = pool.slices.filter(current=True, all_nodes=True).exists() or any(
            NodeSelector(json.loads(s)).matches(info) for s in selectors if s != "null"
        )
        if reach:
            shared_pools.append(pool)
    context = {
        "node": node,
        "counts": counts,
        "local_pools": list(local_pools),
        "shared_pools": shared_pools,
        "claims": list(ResourceClaim.objects.filter(node_name=name)[:200]),
        "pods": list(Pod.objects.filter(node_name=name)[:200]),
        "held_states": HELD_STATES,
        "raw_yaml": object_yaml(node.raw),
        "yaml_name": name,
    }
    return render_page(
        request,
        template="claims/node_detail.html",
        context=context,
        fragments={"body": "claims/_node_body.html"},
        live=[f"node:{name}"],
    )
