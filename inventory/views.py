"""Pages for pools, devices and nodes: views translate requests into queries, nothing more.

Device states, counts, grids and reachability come from `inventory.services` (SQL annotations
and grouped queries), so every list page is a fixed number of queries whatever the cluster size.
"""

from __future__ import annotations

import json
from collections import defaultdict

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.allocator.pools import NodeInfo, NodeSelector
from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from dashboard.views import (
    apply_filters,
    distinct_values,
    list_page,
    paginate,
    read_access,
    render_page,
)
from inventory.filters import NodeFilterSet, PoolFilterSet
from inventory.models import Device, Node, Pool, ResourceSlice
from inventory.services import (
    HELD_STATES,
    annotate_device_state,
    capacity_usage,
    matching_taint_rules,
    pool_context,
    pool_segments,
    pool_utilisation,
    reachable_counts,
    refine_device_states,
)


@read_access
def pool_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PoolFilterSet,
        queryset=pool_utilisation(Pool.objects.all()),
        template="inventory/pool_list.html",
        fragment="inventory/_pool_table.html",
        live=["pools"],
        rows=lambda pools: [(pool, pool_segments(pool)) for pool in pools],
        context={"drivers": distinct_values(Pool, "driver")},
    )


@read_access
def pool_detail(request: HttpRequest, pk: int) -> HttpResponse:
    pool = get_object_or_404(Pool, pk=pk)
    context = pool_context(pool)
    context["slices"] = list(
        ResourceSlice.objects.filter(pool=pool)
        .annotate(n_devices=Count("devices"))
        .only("pk", "name", "generation", "current", "node_name", "all_nodes", "node_selector")
        .order_by("-generation", "name")
    )
    return render_page(
        request,
        template="inventory/pool_detail.html",
        context=context,
        fragments={"body": "inventory/_pool_body.html"},
        live=[f"pool:{pool.pk}"],
    )


@read_access
def device_detail(request: HttpRequest, pk: int) -> HttpResponse:
    device = get_object_or_404(
        annotate_device_state(Device.objects.select_related("pool", "slice")), pk=pk
    )
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
    }
    return render_page(
        request,
        template="inventory/device_detail.html",
        context=context,
        fragments={"body": "inventory/_device_body.html"},
        live=[f"pool:{device.pool_id}"],
    )


@read_access
def node_list(request: HttpRequest) -> HttpResponse:
    nodes, params, errors = apply_filters(
        request, NodeFilterSet, Node.objects.only("pk", "name", "ready", "unschedulable", "labels")
    )
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
        template="inventory/node_list.html",
        context={"page_obj": page, "rows": rows, "params": params, "errors": errors},
        fragments={"table": "inventory/_node_table.html"},
        live=["nodes", "devices", "claims"],
    )


@read_access
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
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
    }
    return render_page(
        request,
        template="inventory/node_detail.html",
        context=context,
        fragments={"body": "inventory/_node_body.html"},
        live=[f"node:{name}"],
    )
