"""What the device pages show: pool grids, bar segments, reachable devices per node, rules,
who holds a device (claim and the pods it is reserved for), names in natural order, node
selectors and attributes as text.

Computed from rows, with no request: `claims.views` translate requests into calls of these
functions and render the result (the rule is in `claims/views/__init__.py`); the overview reuses
`bar_segments`, the what-if page `pool_context` for its highlighted grids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import CharField, Count, Exists, F, Func, OrderBy, OuterRef, Q, Value
from django.db.models.functions import Length

from claims.choices import DeviceState
from claims.devices.counts import available_count
from claims.devices.states import annotate_device_state, refine_device_states
from claims.devices.usage import capacity_usages, counter_usage
from claims.models import AllocatedDevice, Pod, Reservation
from dralib.allocator.nodeselection import NodeInfo, NodeSelector
from inventory.models import Device, DeviceTaintRule, Node, Pool
from inventory.visibility import EVERYTHING, OTHER_CLAIM, Visibility

DIGITS = "0123456789"

STATE_LEGEND = [
    (DeviceState.FREE, "free"),
    (DeviceState.ALLOCATED, "allocated"),
    (DeviceState.SHARED, "shared"),
    (DeviceState.ADMIN, "admin access"),
    (DeviceState.TAINTED, "tainted"),
    (DeviceState.BLOCKED, "blocked (counters exhausted)"),
    (DeviceState.UNHEALTHY, "unhealthy (NoExecute taint, Ready=False or reported Unhealthy)"),
]

_LEGEND_ORDER = {str(state): index for index, (state, _) in enumerate(STATE_LEGEND)}


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


def natural_key(name: str) -> tuple[str, int, str]:
    """Sort key that puts `link-2` before `link-10`: the name without its trailing digits, then
    its length (more trailing digits, a larger number), then the name. `natural_order` is the
    same key in SQL, so a pool grid and a paginated device list agree."""
    return (name.rstrip(DIGITS), len(name), name)


def natural_order(name: str = "name", *, descending: bool = False) -> list[OrderBy]:
    """`natural_key` of the column `name` as ORDER BY terms (RTRIM with a character set is
    the same function in SQLite and PostgreSQL)."""
    stem = Func(F(name), Value(DIGITS), function="RTRIM", output_field=CharField())
    terms = (stem, Length(name), F(name))
    return [term.desc() if descending else term.asc() for term in terms]


@dataclass(frozen=True)
class Consumer:
    """One `status.reservedFor` entry of a claim: usually a pod, `stored` when we have it."""

    namespace: str
    name: str
    resource: str = "pods"
    api_group: str = ""
    stored: bool = False

    @property
    def is_pod(self) -> bool:
        return self.resource == "pods" and self.api_group == ""


@dataclass
class Holding:
    """A claim holding a device, with what its consumers are, for lists and tiles."""

    namespace: str
    claim: str
    request: str = ""
    share_id: str = ""
    admin_access: bool = False
    consumers: list[Consumer] = field(default_factory=list)
    # A claim of a namespace the person may not see: named by neither claim nor pod.
    hidden: bool = False

    @property
    def label(self) -> str:
        """The holder in a few words: its first pod (the claim when reserved for nobody)."""
        if self.hidden:
            return OTHER_CLAIM
        return self.consumers[0].name if self.consumers else f"{self.namespace}/{self.claim}"

    @property
    def text(self) -> str:
        if self.hidden:
            return f"held by {OTHER_CLAIM}"
        claim = f"claim {self.namespace}/{self.claim}"
        if not self.consumers:
            return f"{claim}, reserved for nobody"
        names = ", ".join(c.name if c.is_pod else f"{c.resource}/{c.name}" for c in self.consumers)
        return f"{claim}, reserved for {names}"


def consumers_by_claim(claim_ids: Iterable[int]) -> dict[int, list[Consumer]]:
    """The consumers of each claim, pods first by name, and whether each pod is stored (one
    query whatever the number of claims)."""
    ids = sorted(set(claim_ids))
    found: dict[int, list[Consumer]] = defaultdict(list)
    if not ids:
        return found
    pod = Pod.objects.filter(namespace=OuterRef("claim__namespace"), name=OuterRef("name"))
    rows = (
        Reservation.objects.filter(claim_id__in=ids)
        .annotate(stored=Exists(pod))
        .order_by("claim_id", "resource", "name")
        .values_list("claim_id", "claim__namespace", "name", "resource", "api_group", "stored")
    )
    for claim_id, namespace, name, resource, api_group, stored in rows:
        found[claim_id].append(
            Consumer(namespace, name, resource=resource, api_group=api_group, stored=stored)
        )
    for consumers in found.values():
        consumers.sort(key=lambda c: (not c.is_pod, c.name))
    return found


def _holding(
    entry: AllocatedDevice, consumers: Mapping[int, list[Consumer]], seen: Visibility
) -> Holding:
    if not seen.allows(entry.claim.namespace):
        return Holding(namespace="", claim="", request=entry.request, hidden=True)
    return Holding(
        namespace=entry.claim.namespace,
        claim=entry.claim.name,
        request=entry.request,
        share_id=entry.share_id,
        admin_access=entry.admin_access,
        consumers=list(consumers.get(entry.claim_id, [])),
    )


def device_holdings(
    devices: Iterable[Device], *, seen: Visibility = EVERYTHING
) -> dict[str, list[Holding]]:
    """Who holds each device, by `driver/pool/device` key: its claims and their consumers
    (two queries whatever the number of devices); claims `seen` does not allow are hidden."""
    keys = {(d.driver, d.pool_name, d.name) for d in devices}
    if not keys:
        return {}
    wanted = reduce(or_, (Q(driver=dr, pool=pool, device=name) for dr, pool, name in keys))
    entries = list(
        AllocatedDevice.objects.filter(wanted)
        .select_related("claim")
        .only(
            "pk",
            "driver",
            "pool",
            "device",
            "request",
            "share_id",
            "admin_access",
            "claim__namespace",
            "claim__name",
        )
        .order_by("claim__namespace", "claim__name", "pk")
    )
    consumers = consumers_by_claim(entry.claim_id for entry in entries)
    holdings: dict[str, list[Holding]] = defaultdict(list)
    for entry in entries:
        holdings[entry.key].append(_holding(entry, consumers, seen))
    return holdings


def holders_by_device(
    driver: str, pool_name: str, *, seen: Visibility = EVERYTHING
) -> dict[str, list[Any]]:
    """Allocation results naming devices of one pool, with their claims (one query); each
    says `hidden` when its claim's namespace is not one `seen` allows."""

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
        entry.hidden = not seen.allows(entry.claim.namespace)
        holders[entry.device].append(entry)
    return holders


def pool_grid(
    pool: Pool, *, chosen: set[str] | None = None, seen: Visibility = EVERYTHING
) -> list[dict[str, Any]]:
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
        .order_by(*natural_order("name"), "pk")
    )
    refine_device_states(devices)
    holders = holders_by_device(pool.driver, pool.name, seen=seen)
    consumers = consumers_by_claim(
        h.claim_id for held in holders.values() for h in held if not h.hidden
    )
    chosen = chosen or set()
    cells = []
    for device in devices:
        held = holders.get(device.name, [])
        holdings = [_holding(h, consumers, seen) for h in held]
        tip = [f"{device.name}: {device.effective_state}"]
        tip += [f"{h.text} (request {h.request})" for h in holdings]
        cells.append(
            {
                "device": device,
                "state": device.effective_state,
                "title": "\n".join(tip),
                "chosen": device.name in chosen,
                "holders": held,
                # The first holder is written on the tile; the others are counted.
                "holding": holdings[0] if holdings else None,
                "more_holders": max(0, len(holdings) - 1),
                "label": "; ".join([device.effective_state, *(h.text for h in holdings)]),
            }
        )
    return cells


def grid_groups(grid: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The grid's cells grouped under the counter set they consume (a partitioned GPU and its
    partitions), in natural order; devices that consume none form one unnamed group, first.

    Empty when no device consumes a counter set: the page shows the flat grid then. A group is
    open when what-if chose one of its devices.
    """
    by_set: dict[str, list[dict[str, Any]]] = {}
    for cell in grid:
        sets = sorted(
            {
                str(entry.get("counterSet"))
                for entry in cell["device"].consumes_counters or []
                if isinstance(entry, dict) and entry.get("counterSet")
            }
        )
        by_set.setdefault(sets[0] if sets else "", []).append(cell)
    if set(by_set) <= {""}:
        return []
    groups = []
    for name in sorted(by_set, key=lambda n: (n != "", natural_key(n))):
        cells = by_set[name]
        states: dict[str, int] = {}
        for cell in cells:
            states[cell["state"]] = states.get(cell["state"], 0) + 1
        groups.append(
            {
                "name": name,
                "cells": cells,
                "states": sorted(states.items(), key=lambda item: _LEGEND_ORDER.get(item[0], 99)),
                "chosen": any(cell["chosen"] for cell in cells),
            }
        )
    return groups


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


# The pool status card's columns, in the order of its cells: a header a person reads, and the
# field of the ResourcePoolStatusRequest entry it shows.
POOL_STATUS_COLUMNS = (
    ("Total devices", "totalDevices"),
    ("Allocated", "allocatedDevices"),
    ("Available", "availableDevices"),
    ("Unavailable", "unavailableDevices"),
    ("Slices", "resourceSliceCount"),
)


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


def pool_context(
    pool: Pool, *, chosen: set[str] | None = None, seen: Visibility = EVERYTHING
) -> dict[str, Any]:
    """A pool's grid, counts, bar, legend, shared counters and shared devices' capacity."""
    grid = pool_grid(pool, chosen=chosen, seen=seen)
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
        "groups": grid_groups(grid),
        "counts": counts,
        "segments": bar_segments(counts, len(grid)),
        "legend": STATE_LEGEND,
        "counters": counter_usage(pool),
        "shared_devices": shared_devices,
        "other_claim": OTHER_CLAIM,
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


# Node selector operators as a person reads them.
_OPERATORS = {"In": "in", "NotIn": "notin", "Gt": ">", "Lt": "<"}


def _requirement_text(requirement: Mapping[str, Any]) -> str:
    key = str(requirement.get("key", ""))
    operator = str(requirement.get("operator", ""))
    values = [str(v) for v in requirement.get("values") or []]
    if operator == "Exists":
        return f"{key} exists"
    if operator == "DoesNotExist":
        return f"{key} does not exist"
    if operator in ("In", "NotIn"):
        return f"{key} {_OPERATORS[operator]} ({', '.join(values)})"
    if operator in ("Gt", "Lt"):
        return f"{key} {_OPERATORS[operator]} {', '.join(values)}"
    return f"{key} {operator} ({', '.join(values)})".strip()


def node_selector_terms(selector: Any) -> list[str]:
    """A core/v1 NodeSelector as text, one string per term (terms are ORed, the requirements of
    a term ANDed): `topology.kubernetes.io/zone in (zone-a, zone-b) and metadata.name notin (n1)`.
    A term without requirements selects no node and says so."""
    if not isinstance(selector, Mapping):
        return []
    terms = []
    for term in selector.get("nodeSelectorTerms") or []:
        if not isinstance(term, Mapping):
            continue
        parts = [
            _requirement_text(requirement)
            for group in ("matchExpressions", "matchFields")
            for requirement in term.get(group) or []
            if isinstance(requirement, Mapping)
        ]
        terms.append(" and ".join(parts) if parts else "(empty term: no node)")
    return terms


def attribute_rows(attributes: Any) -> list[tuple[str, str, str]]:
    """A device's attributes as (name, value, type), by name: `{"int": 4}` is ("4", "int")."""
    rows = []
    for name, typed in sorted((attributes or {}).items()):
        if isinstance(typed, Mapping) and len(typed) == 1:
            ((kind, value),) = typed.items()
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            rows.append((str(name), text, str(kind)))
        else:
            rows.append((str(name), str(typed), ""))
    return rows
