"""What the device pages show: pool grids, bar segments, reachable devices per node, rules.

Computed from rows, with no request: `claims.views` translate requests into calls of these
functions and render the result (the rule is in `claims/views/__init__.py`); the overview reuses
`bar_segments`, the what-if page `pool_context` for its highlighted grids.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, Q

from claims.choices import DeviceState
from claims.devices.counts import available_count
from claims.devices.states import annotate_device_state, refine_device_states
from claims.devices.usage import capacity_usages, counter_usage
from claims.models import AllocatedDevice
from dralib.allocator.pools import NodeInfo, NodeSelector
from inventory.models import Device, DeviceTaintRule, Node, Pool

STATE_LEGEND = [
    (DeviceState.FREE, "free"),
    (DeviceState.ALLOCATED, "allocated"),
    (DeviceState.SHARED, "shared"),
    (DeviceState.ADMIN, "admin access"),
    (DeviceState.TAINTED, "tainted"),
    (DeviceState.BLOCKED, "blocked (counters exhausted)"),
    (DeviceState.UNHEALTHY, "unhealthy (NoExecute taint, Ready=False or reported Unhealthy)"),
]


def percent(part: float, whole: float) -> float:
    """`part` as a percentage of `whole`, one decimal; 0 when `whole` is 0."""
    return round(100.0 * part / whole, 1) if whole else 0.0


def bar_segments(counts: dict[str, int], total: int) -> list[tuple[str, float]]:
    """Widths (percent) of the stacked bar: exclusive, shared, admin, tainted, blocked."""
    exclusive = counts.get("allocated", 0) - counts.get("shared", 0)
    parts = [
        ("allocated", exclusive),
        ("shared", counts.get("shared", 0)),
        ("admin", counts.get("admin", 0)),
        ("tainted", counts.get("tainted", 0)),
        (DeviceState.BLOCKED, counts.get("blocked", 0)),
    ]
    return [(name, percent(n, total)) for name, n in parts if n > 0]


def pool_segments(pool: Pool) -> list[tuple[str, float]]:
    """The stacked bar of a pool annotated by `pool_utilisation`."""
    counts = {
        "allocated": pool.devices_allocated,
        "shared": pool.devices_shared,
        "admin": pool.devices_admin,
        "tainted": pool.devices_tainted,
    }
    return bar_segments(counts, pool.devices_total)


def holders_by_device(driver: str, pool_name: str) -> dict[str, list[Any]]:
    """Allocation results naming devices of one pool, with their claims (one query)."""

    holders: dict[str, list[Any]] = defaultdict(list)
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
    """The keys of `claims.devices.counts.pool_device_counts`, from the grid's devices."""
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
    counts["available"] = available_count(counts)
    return counts


def pool_status_entry(
    pool: Pool, grid: list[dict[str, Any]], counts: dict[str, int]
) -> dict[str, Any]:
    """The pool's ResourcePoolStatusRequest entry (KEP-5677) from its page grid, no queries.

    The numbers `/api/inventory/pool-status/` computes in SQL (`claims.devices.poolstatus`),
    read off the devices the page already shows: unavailable means not allocated yet kept
    from a new allocation (tainted, blocked by counters, or unhealthy).
    """
    if not pool.complete:
        return {"validationError": "incomplete: not every slice of the newest generation is here"}
    kept = (DeviceState.TAINTED, DeviceState.BLOCKED, DeviceState.UNHEALTHY)
    unavailable = sum(1 for cell in grid if not cell["device"].allocated and cell["state"] in kept)
    return {
        "resourceSliceCount": pool.resource_slice_count,
        "totalDevices": counts["total"],
        "allocatedDevices": counts["allocated"],
        "availableDevices": counts["total"] - counts["allocated"] - unavailable,
        "unavailableDevices": unavailable,
    }


def pool_context(pool: Pool, *, chosen: set[str] | None = None) -> dict[str, Any]:
    """A pool's grid, counts, bar, legend, shared counters and shared devices' capacity."""
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


def matching_taint_rules(device: Device) -> list[DeviceTaintRule]:
    """DeviceTaintRules whose selector names this device (an empty field matches every device)."""
    return list(
        DeviceTaintRule.objects.filter(
            Q(driver="") | Q(driver=device.driver),
            Q(pool_name="") | Q(pool_name=device.pool_name),
            Q(device_name="") | Q(device_name=device.name),
        )
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
