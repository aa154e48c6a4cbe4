"""Pages of what the cluster offers, with the claims on it: pools, devices, DeviceClasses,
DeviceTaintRules, classic ResourceClasses and nodes.

Each list is `list_page` over its FilterSet (or a fixed set of grouped queries), so it runs a
fixed number of queries whatever the cluster size; device states, grids and reachability come
from `claims.devices`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from claims.choices import DeviceState
from claims.devices.classes import class_membership, class_utilisation
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
from claims.filters import DeviceFilterSet
from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from dashboard.views import (
    apply_filters,
    apply_ordering,
    distinct_values,
    list_page,
    object_yaml,
    paginate,
    read_access,
    render_page,
    yaml_download,
)
from dralib.allocator.pools import NodeInfo, NodeSelector
from inventory.filters import (
    DeviceClassFilterSet,
    DeviceTaintRuleFilterSet,
    NodeFilterSet,
    PoolFilterSet,
    ResourceClassFilterSet,
)
from inventory.models import (
    Device,
    DeviceClass,
    DeviceTaintRule,
    Node,
    Pool,
    ResourceClass,
    ResourceSlice,
)

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
NAME_ORDERING = {"name": "name", "age": "created_at"}
DEVICE_ORDERING = {"driver": "driver", "pool": "pool_name", "name": "name", "state": "state"}


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


def _refined(devices: list[Device]) -> list[Device]:
    refine_device_states(devices)
    return devices


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
        "raw_yaml": object_yaml(device_class.raw),
        "yaml_name": name,
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
