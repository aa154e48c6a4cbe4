"""Pages for pools, devices and nodes: views translate requests into queries, nothing more.

Device states and counts come from `inventory.services` (SQL annotations), so every list page
is a fixed number of queries whatever the cluster size.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.allocator.pools import NodeInfo, NodeSelector
from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from dashboard.views import apply_filters, paginate, percent, read_access, render_page
from inventory.choices import DeviceState
from inventory.filters import NodeFilterSet, PoolFilterSet
from inventory.models import Device, DeviceTaintRule, Node, Pool, ResourceSlice
from inventory.services import (
    HELD_STATES,
    STATE_BLOCKED,
    annotate_device_state,
    capacity_usage,
    capacity_usages,
    counter_usage,
    pool_utilisation,
    refine_device_states,
)

STATE_LEGEND = [
    (DeviceState.FREE, "free"),
    (DeviceState.ALLOCATED, "allocated"),
    (DeviceState.SHARED, "shared"),
    (DeviceState.ADMIN, "admin access"),
    (DeviceState.TAINTED, "tainted"),
    (STATE_BLOCKED, "blocked (counters exhausted)"),
    (DeviceState.UNHEALTHY, "unhealthy (NoExecute taint or Ready=False)"),
]


def bar_segments(counts: dict[str, int], total: int) -> list[tuple[str, float]]:
    """Widths (percent) of the stacked bar: exclusive, shared, admin, tainted, blocked."""
    exclusive = counts.get("allocated", 0) - counts.get("shared", 0)
    parts = [
        ("allocated", exclusive),
        ("shared", counts.get("shared", 0)),
        ("admin", counts.get("admin", 0)),
        ("tainted", counts.get("tainted", 0)),
        (STATE_BLOCKED, counts.get("blocked", 0)),
    ]
    return [(name, percent(n, total)) for name, n in parts if n > 0]


@read_access
def pool_list(request: HttpRequest) -> HttpResponse:
    pools, params, errors = apply_filters(request, PoolFilterSet, Pool.objects.all())
    page = paginate(request, pool_utilisation(pools))
    rows = []
    for pool in page.object_list:
        counts = {
            "allocated": pool.devices_allocated,
            "shared": pool.devices_shared,
            "admin": pool.devices_admin,
            "tainted": pool.devices_tainted,
        }
        rows.append((pool, bar_segments(counts, pool.devices_total)))
    context = {
        "page_obj": page,
        "rows": rows,
        "params": params,
        "errors": errors,
        "drivers": list(
            Pool.objects.order_by("driver").values_list("driver", flat=True).distinct()
        ),
    }
    return render_page(
        request,
        template="inventory/pool_list.html",
        context=context,
        fragments={"table": "inventory/_pool_table.html"},
        live=["pools"],
    )


def holders_by_device(driver: str, pool_name: str) -> dict[str, list[AllocatedDevice]]:
    """Allocation results naming devices of one pool, with their claims (one query)."""
    holders: dict[str, list[AllocatedDevice]] = defaultdict(list)
    entries = AllocatedDevice.objects.filter(driver=driver, pool=pool_name).select_related("claim")
    for entry in entries.only(
        "pk",
        "device",
        "request",
        "share_id",
        "admin_access",
        "consumed_capacity",
        "claim__namespace",
        "claim__name",
        "claim__state",
    ):
        holders[entry.device].append(entry)
    return holders


def pool_grid(pool: Pool, *, chosen: set[str] | None = None) -> list[dict[str, Any]]:
    """The devices of a pool's current generation with state, holders and whether chosen."""
    devices = list(
        annotate_device_state(pool.devices.filter(current=True))
        .only(
            "pk",
            "name",
            "driver",
            "pool_id",
            "pool_name",
            "current",
            "allow_multiple_allocations",
            "tainted",
            "taints",
            "consumes_counters",
            "capacity",
        )
        .order_by("name")
    )
    refine_device_states(devices)
    holders = holders_by_device(pool.driver, pool.name)
    chosen = chosen or set()
    cells = []
    for device in devices:
        held = holders.get(device.name, [])
        tip = [f"{device.name}: {device.effective_state}"]
        tip += [f"{h.claim.namespace}/{h.claim.name} ({h.request})" for h in held]
        cells.append(
            {
                "device": device,
                "state": device.effective_state,
                "title": "\n".join(tip),
                "chosen": device.name in chosen,
                "holders": held,
            }
        )
    return cells


def grid_counts(grid: list[dict[str, Any]]) -> dict[str, int]:
    """The keys of `inventory.services.pool_device_counts`, from the grid's devices."""
    devices = [cell["device"] for cell in grid]
    counts = {
        "total": len(devices),
        "allocated": sum(d.allocated for d in devices),
        "shared": sum(d.shared for d in devices),
        "tainted": sum(d.is_tainted and not d.allocated for d in devices),
        "admin": sum(d.admin_access and not (d.allocated or d.is_tainted) for d in devices),
        "blocked": sum(d.blocked for d in devices),
        "unhealthy": sum(d.unhealthy for d in devices),
    }
    counts["free"] = counts["total"] - counts["allocated"] - counts["tainted"]
    return counts


def pool_context(pool: Pool, *, chosen: set[str] | None = None) -> dict[str, Any]:
    grid = pool_grid(pool, chosen=chosen)
    counts = grid_counts(grid)
    shareable = [
        cell
        for cell in grid
        if cell["device"].allow_multiple_allocations and cell["device"].capacity
    ]
    usage = capacity_usages([cell["device"] for cell in shareable])
    shared_devices = [
        {
            "device": cell["device"],
            "capacity": usage[cell["device"].pk],
            "shares": cell["holders"],
        }
        for cell in shareable
    ]
    return {
        "pool": pool,
        "grid": grid,
        "counts": counts,
        "segments": bar_segments(counts, len(grid)),
        "legend": STATE_LEGEND,
        "counters": counter_usage(pool),
        "shared_devices": shared_devices,
    }


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


def matching_taint_rules(device: Device) -> list[DeviceTaintRule]:
    return list(
        DeviceTaintRule.objects.filter(
            Q(driver="") | Q(driver=device.driver),
            Q(pool_name="") | Q(pool_name=device.pool_name),
            Q(device_name="") | Q(device_name=device.name),
        )
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


def reachable_counts(nodes: list[Node]) -> dict[str, dict[str, int]]:
    """Per node: devices reachable from it (local, allNodes, nodeSelector) and how many are free.

    Three grouped queries whatever the number of nodes; node selectors are evaluated in Python
    once per distinct selector and node.
    """
    names = [node.name for node in nodes]
    devices = annotate_device_state(Device.objects.filter(current=True)).order_by()
    free = Q(state__in=(DeviceState.FREE, DeviceState.ADMIN))
    counts = {name: {"local": 0, "reachable": 0, "free": 0} for name in names}
    local = (
        devices.filter(node_name__in=names)
        .values("node_name")
        .annotate(total=Count("pk"), free=Count("pk", filter=free))
    )
    for row in local:
        entry = counts[row["node_name"]]
        entry["local"] = entry["reachable"] = row["total"]
        entry["free"] = row["free"]
    everywhere = devices.filter(all_nodes=True, node_name="").aggregate(
        total=Count("pk"), free=Count("pk", filter=free)
    )
    selected = (
        devices.filter(all_nodes=False, node_name="", node_selector__isnull=False)
        .values("node_selector")
        .annotate(total=Count("pk"), free=Count("pk", filter=free))
    )
    selectors = [
        (NodeSelector(row["node_selector"]), row["total"], row["free"]) for row in selected
    ]
    for node in nodes:
        entry = counts[node.name]
        entry["reachable"] += everywhere["total"] or 0
        entry["free"] += everywhere["free"] or 0
        info = NodeInfo(name=node.name, labels=dict(node.labels or {}))
        for selector, total, n_free in selectors:
            if not selector.error and selector.matches(info):
                entry["reachable"] += total
                entry["free"] += n_free
    return counts


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
