"""Pages of what the cluster offers, with the claims on it: pools, devices, DeviceClasses,
DeviceTaintRules, classic ResourceClasses and nodes.

Each list is `list_page` over its FilterSet (or a fixed set of grouped queries), so it runs a
fixed number of queries whatever the cluster size; device states, grids, holders and
reachability come from `claims.devices`. Device lists sort names naturally (`order_devices`),
which `list_page`'s one-column ordering cannot, so they paginate by hand. Detail pages are found
by Kubernetes names (see `claims/urls.py`).
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count, F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

from claims.choices import DeviceState
from claims.devices.availability import (
    AvailabilityScope,
    class_availability,
    class_unit_counts,
    device_availability,
)
from claims.devices.classes import class_membership, class_utilisation
from claims.devices.counts import pool_utilisation
from claims.devices.pages import (
    POOL_STATUS_COLUMNS,
    attribute_rows,
    consumers_by_claim,
    device_holdings,
    matching_taint_rules,
    natural_order,
    node_selector_terms,
    pool_context,
    pool_segments,
    pool_status_entry,
    reachable_counts,
)
from claims.devices.states import HELD_STATES, annotate_device_state, refine_device_states
from claims.devices.usage import capacity_usage
from claims.filters import DeviceFilterSet, NodeUnitsFilterSet, PoolUnitsFilterSet
from claims.models import AllocatedDevice, Pod, ResourceClaim
from claims.views.missing import moved_to, not_found
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
from dralib.allocator.nodeselection import NodeInfo, NodeSelector
from inventory.filters import (
    DeviceClassFilterSet,
    DeviceTaintRuleFilterSet,
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
from inventory.visibility import OTHER_CLAIM, Visibility, scope_namespaced, visibility_for

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
# Sortable device columns; every order ends with driver, pool and the name in natural order
# (`link-2` before `link-10`), so rows with equal values keep one order from page to page.
DEVICE_ORDERING = {"driver": "driver", "pool": "pool_name", "name": "name", "state": "state"}


def order_devices(
    request: HttpRequest, devices: QuerySet[Device]
) -> tuple[QuerySet[Device], list[str]]:
    """Devices in the order `?ordering=` asks (see `apply_ordering`), names in natural order."""
    wanted = request.GET.get("ordering", "").strip()
    column = wanted.removeprefix("-")
    if wanted and column not in DEVICE_ORDERING:
        return apply_ordering(request, devices, DEVICE_ORDERING)  # the error names the columns
    descending = wanted.startswith("-")
    if column == "name":
        lead = natural_order("name", descending=descending)
    elif column:
        key = F(DEVICE_ORDERING[column])
        lead = [key.desc() if descending else key.asc()]
    else:
        lead = []
    return devices.order_by(*lead, "driver", "pool_name", *natural_order("name"), "pk"), []


@read_access
def pool_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filterset=PoolUnitsFilterSet,
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
            "free": "units_free",
        },
        context={
            "drivers": distinct_values(Pool, "driver"),
            "classes": distinct_values(DeviceClass, "name"),
        },
    )


@read_access
def pool_by_id(request: HttpRequest, pk: int) -> HttpResponse:
    """An old `/pools/<id>/` link: to the pool's name while the row exists."""
    pool = get_object_or_404(Pool.objects.only("driver", "name"), pk=pk)
    return moved_to(request, reverse("pool-detail", args=[pool.driver, pool.name]))


@read_access
def pool_detail(request: HttpRequest, driver: str, pool: str) -> HttpResponse:
    found = Pool.objects.filter(driver=driver, name=pool).first()
    if found is None:
        return not_found(
            request, kind="pool", name=f"{driver}/{pool}", listing=reverse("pool-list")
        )
    context = pool_context(found, seen=visibility_for(request))
    context["pool_status"] = pool_status_entry(found, context["grid"], context["counts"])
    context["status_columns"] = POOL_STATUS_COLUMNS
    slices = list(
        ResourceSlice.objects.filter(pool=found)
        .annotate(n_devices=Count("devices"))
        .only("pk", "name", "generation", "current", "node_name", "all_nodes", "node_selector")
        .order_by("-generation", "name")
    )
    context["slices"] = [(s, node_selector_terms(s.node_selector)) for s in slices]
    return render_page(
        request,
        template="claims/pool_detail.html",
        context=context,
        fragments={"body": "claims/_pool_body.html"},
        live=[f"pool:{found.driver}/{found.name}"],
    )


def _device_rows(devices: list[Device], seen: Visibility) -> list[tuple[Device, list[Any]]]:
    """Each device with its state refined and who holds it (claims and their pods)."""
    refine_device_states(devices)
    holdings = device_holdings(devices, seen=seen)
    return [(device, holdings.get(device.key, [])) for device in devices]


@read_access
def device_list(request: HttpRequest) -> HttpResponse:
    devices, params, errors = apply_filters(
        request,
        DeviceFilterSet,
        annotate_device_state(Device.objects.filter(current=True).only(*DEVICE_COLUMNS)),
    )
    if not errors:
        devices, errors = order_devices(request, devices)
    page = paginate(request, devices)
    context = {
        "page_obj": page,
        "params": params,
        "errors": errors,
        "rows": _device_rows(list(page.object_list), visibility_for(request)),
        "drivers": distinct_values(Device, "driver"),
        "states": DeviceState.choices,
    }
    if not errors and any(params.values()):
        # What the filtered devices amount to in physical units (a MIG GPU counts once).
        context["units"] = device_availability(devices.order_by().values_list("pk", flat=True))
    return render_page(
        request,
        template="claims/device_list.html",
        context=context,
        fragments={"table": "claims/_device_table.html"},
        live=["devices", "pools"],
    )


@read_access
def device_by_id(request: HttpRequest, pk: int) -> HttpResponse:
    """An old `/devices/<id>/` link: to the device's name while the row exists."""
    device = get_object_or_404(Device.objects.only("driver", "pool_name", "name"), pk=pk)
    return moved_to(
        request, reverse("device-detail", args=[device.driver, device.pool_name, device.name])
    )


@read_access
def device_detail(request: HttpRequest, driver: str, pool: str, name: str) -> HttpResponse:
    # A stale generation may still list the name beside the current one: show the current.
    device = (
        annotate_device_state(Device.objects.select_related("pool", "slice"))
        .filter(driver=driver, pool_name=pool, name=name)
        .order_by("-current", "-pk")
        .first()
    )
    if device is None:
        parent = None
        if Pool.objects.filter(driver=driver, name=pool).exists():
            parent = (f"Pool {pool}", reverse("pool-detail", args=[driver, pool]))
        return not_found(
            request,
            kind="device",
            name=f"{driver}/{pool}/{name}",
            listing=reverse("device-list"),
            parent=parent,
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
    seen = visibility_for(request)
    for holder in holders:
        # Another namespace's claim: held, but by whom is not said (nor its device status).
        holder.hidden = not seen.allows(holder.claim.namespace)
        if holder.hidden:
            holder.conditions, holder.network_data = [], None
    consumers = consumers_by_claim(h.claim_id for h in holders if not h.hidden)
    context = {
        "device": device,
        "holders": [(h, consumers.get(h.claim_id, [])) for h in holders],
        "other_claim": OTHER_CLAIM,
        "capacity": capacity_usage(device),
        "rules": matching_taint_rules(device),
        "attributes": attribute_rows(device.attributes),
        "selector_terms": node_selector_terms(device.node_selector),
        "raw_yaml": object_yaml(device.slice.raw),
        "yaml_name": device.slice.name,
        "yaml_title": f"Its ResourceSlice {device.slice.name}",
    }
    return render_page(
        request,
        template="claims/device_detail.html",
        context=context,
        fragments={"body": "claims/_device_body.html"},
        live=[f"pool:{device.driver}/{device.pool_name}"],
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
    device_class = DeviceClass.objects.filter(name=name).first()
    if device_class is None:
        return not_found(
            request, kind="DeviceClass", name=name, listing=reverse("device-class-list")
        )
    download = yaml_download(request, raw=device_class.raw, filename=name)
    if download is not None:
        return download
    membership = class_membership()
    members = membership.members.get(name)
    devices = annotate_device_state(
        Device.objects.filter(pk__in=sorted(members or ())).only(*DEVICE_COLUMNS)
    )
    devices, errors = order_devices(request, devices)
    page = paginate(request, devices)
    context = {
        "device_class": device_class,
        "errors": errors,
        "page_obj": page,
        "rows": _device_rows(list(page.object_list), visibility_for(request)),
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


def _order_nodes(
    request: HttpRequest, nodes: QuerySet[Node], params: dict[str, str]
) -> tuple[QuerySet[Node], list[str]]:
    """`?ordering=` over the node list's columns; free units only once a class says of what."""
    columns = {"name": "name", "age": "created_at"}
    if params.get("class"):
        columns["free"] = "units_free"
    elif request.GET.get("ordering", "").strip().removeprefix("-") == "free":
        return nodes.none(), ["ordering: free units of which class? add class=<DeviceClass>"]
    return apply_ordering(request, nodes, columns)


@read_access
def node_list(request: HttpRequest) -> HttpResponse:
    nodes, params, errors = apply_filters(
        request,
        NodeUnitsFilterSet,
        Node.objects.only("pk", "name", "ready", "unschedulable", "labels", "created_at"),
    )
    if not errors:
        nodes, errors = _order_nodes(request, nodes, params)
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
    visible_claims = scope_namespaced(ResourceClaim.objects.all(), visibility_for(request))
    claims_on = dict(
        visible_claims.filter(node_name__in=[n.name for n in page.object_list])
        .values_list("node_name")
        .annotate(n=Count("pk"))
        .values_list("node_name", "n")
    )
    units = class_unit_counts("node", keys=[node.name for node in page.object_list])
    for node in page.object_list:
        node.class_units = [
            (name, found[node.name]) for name, found in units.items() if node.name in found
        ]
    rows = [(node, counts[node.name], claims_on.get(node.name, 0)) for node in page.object_list]
    context = {"page_obj": page, "rows": rows, "params": params, "errors": errors}
    context["classes"] = sorted(units)
    return render_page(
        request,
        template="claims/node_list.html",
        context=context,
        fragments={"table": "claims/_node_table.html"},
        live=["nodes", "devices", "claims"],
    )


@read_access
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = Node.objects.filter(name=name).first()
    if node is None:
        return not_found(request, kind="node", name=name, listing=reverse("node-list"))
    download = yaml_download(request, raw=node.raw, filename=name)
    if download is not None:
        return download
    counts = reachable_counts([node])[node.name]
    seen = visibility_for(request)
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
        "availability": [
            entry
            for entry in class_availability(AvailabilityScope(node=name))
            if entry["physical"] and entry["physical"]["total"]
        ],
        "local_pools": list(local_pools),
        "shared_pools": shared_pools,
        "claims": list(scope_namespaced(ResourceClaim.objects.filter(node_name=name), seen)[:200]),
        "pods": list(scope_namespaced(Pod.objects.filter(node_name=name), seen)[:200]),
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
