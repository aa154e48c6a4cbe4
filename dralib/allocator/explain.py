"""Why claims do not fit on a node: per request, how many devices survive each filter stage.

This goes beyond upstream, which only says "cannot allocate". For each request (each subrequest
of a `firstAvailable` request) the devices of the node's usable pools pass through the stages in
the order the allocator checks them, and the report counts what is left after each stage:

1. ``pools``: devices in complete, valid pools the node can use
2. ``class selectors`` and 3. ``request selectors`` (CEL)
4. ``node access``: per-device node selection
5. ``binding conditions``: devices with binding conditions while that feature is off
6. ``taints``: NoSchedule/NoExecute taints the request does not tolerate
7. ``already allocated``: dedicated to other claims (admin access ignores this)
8. ``counters or capacity``: shared counters or consumable capacity exhausted
9. ``constraints``: the most devices that can satisfy the claim's constraints together

The counts look at each device alone, against what is already allocated; the search itself may
still fail when requests compete for the same devices, which the message then says. The devices
stopped at ``already allocated`` or ``counters or capacity`` (they pass everything the request
asks and only other claims stand in the way) are kept as `taken`, at most `MAX_TAKEN` of them,
so that a caller can name the claims holding them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dralib.allocator.allocator import Allocator, allocator_from_scenario
from dralib.allocator.constraints import (
    Constraint,
    DistinctAttributeConstraint,
    attribute_as_set,
    lookup_attribute,
)
from dralib.allocator.counters import CounterTracker
from dralib.allocator.nodeselection import NodeInfo, node_matches
from dralib.allocator.requests import ClaimInfo
from dralib.allocator.search import RequestData, Run, taint_prevents_allocation
from dralib.allocator.selection import SelectorCache, SelectorCompileError, SelectorRuntimeError
from dralib.allocator.slices import DeviceInfo
from dralib.allocator.types import JSON, AllocationError

STAGES = (
    "pools",
    "class selectors",
    "request selectors",
    "node access",
    "binding conditions",
    "taints",
    "already allocated",
    "counters or capacity",
    "constraints",
)


# Devices named per report: enough to name the holders, bounded for a class of thousands.
MAX_TAKEN = 32


@dataclass
class StageCount:
    """How many devices are left after one stage."""

    stage: str
    remaining: int


@dataclass
class RequestReport:
    """The filter funnel of one request or subrequest of a claim on one node."""

    claim: str
    request: str
    wanted: int
    stages: list[StageCount] = field(default_factory=list)
    blocking_stage: str = ""
    message: str = ""
    # (driver, pool, device, stage) of devices other claims hold (see the module docstring).
    taken: list[tuple[str, str, str, str]] = field(default_factory=list)

    def as_dict(self) -> JSON:
        """JSON-ready form."""
        return asdict(self)


def _selectors_match(cache: SelectorCache, selectors: Sequence[JSON], device: DeviceInfo) -> bool:
    for selector in selectors:
        expression = str((selector.get("cel") or {}).get("expression", ""))
        try:
            if not cache.matches(expression, device):
                return False
        except (SelectorCompileError, SelectorRuntimeError):
            return False
    return True


def _constraint_capacity(
    constraints: Sequence[Constraint], request_name: str, devices: list[DeviceInfo]
) -> int:
    """The most devices that can be picked together under the constraints that apply."""
    best = len(devices)
    base, _, sub = request_name.partition("/")
    for constraint in constraints:
        if not constraint.applies(base, sub):
            continue
        name = constraint.attribute_name
        if isinstance(constraint, DistinctAttributeConstraint):
            seen: set[tuple[str, Any]] = set()
            count = 0
            for device in devices:
                attribute = lookup_attribute(device, name)
                values = attribute_as_set(attribute) if attribute is not None else None
                if values is None:
                    continue
                keys = {(values[0], v) for v in values[1]}
                if keys & seen:
                    continue
                seen |= keys
                count += 1
            best = min(best, count)
        else:
            groups: dict[tuple[str, Any], int] = {}
            for device in devices:
                attribute = lookup_attribute(device, name)
                values = attribute_as_set(attribute) if attribute is not None else None
                if values is None:
                    continue
                for value in values[1]:
                    groups[(values[0], value)] = groups.get((values[0], value), 0) + 1
            best = min(best, max(groups.values(), default=0))
    return best


def _funnel(run: Run, key: tuple[int, int, int], data: RequestData) -> RequestReport:
    claim = run.claims[key[0]]
    features = run.features
    request = data.request
    cache = run.selectors
    counters = CounterTracker({}, run.allocated_state)
    class_selectors = ((data.device_class or {}).get("spec") or {}).get("selectors") or []
    counts = dict.fromkeys(STAGES, 0)
    survivors: list[DeviceInfo] = []
    taken: list[tuple[str, str, str, str]] = []
    for pool in run.pools:
        if pool.is_incomplete or pool.is_invalid:
            continue
        for info in pool.slices:
            for device in info.devices:
                device_id = (info.driver, info.pool, device.name)
                counts["pools"] += 1
                if not _selectors_match(cache, class_selectors, device):
                    continue
                counts["class selectors"] += 1
                if not _selectors_match(cache, request.selectors, device):
                    continue
                counts["request selectors"] += 1
                if info.per_device_node_selection and not _node_ok(run.node, device):
                    continue
                counts["node access"] += 1
                if not features.DeviceBindingAndStatus and device.binding_conditions:
                    continue
                counts["binding conditions"] += 1
                if features.DeviceTaints and taint_prevents_allocation(device, request):
                    continue
                counts["taints"] += 1
                if not request.admin_access and device_id in run.allocated_state.allocated_devices:
                    if len(taken) < MAX_TAKEN:
                        taken.append((*device_id, "already allocated"))
                    continue
                counts["already allocated"] += 1
                if not _resources_ok(run, counters, request, device_id, device, pool):
                    if len(taken) < MAX_TAKEN:
                        taken.append((*device_id, "counters or capacity"))
                    continue
                counts["counters or capacity"] += 1
                survivors.append(device)
    counts["constraints"] = _constraint_capacity(
        run.constraints[key[0]], data.request_name, survivors
    )
    wanted = data.num_devices if request.allocation_mode != "All" else max(data.num_devices, 1)
    report = RequestReport(claim=claim.ref, request=data.request_name, wanted=wanted)
    report.stages = [StageCount(stage, counts[stage]) for stage in STAGES]
    report.taken = taken
    for stage in STAGES:
        if counts[stage] < wanted:
            report.blocking_stage = stage
            report.message = f"needs {wanted} device(s), only {counts[stage]} left after {stage}"
            break
    else:
        report.message = (
            f"{counts['constraints']} device(s) fit on their own, {wanted} needed; "
            "the request can be satisfied alone"
        )
    return report


def _node_ok(node: NodeInfo, device: DeviceInfo) -> bool:
    try:
        return node_matches(
            node,
            node_name=device.node_name or "",
            all_nodes=device.all_nodes,
            selector=device.node_selector,
        )
    except AllocationError:
        return False


def _resources_ok(
    run: Run,
    counters: CounterTracker,
    request: Any,
    device_id: tuple[str, str, str],
    device: DeviceInfo,
    pool: Any,
) -> bool:
    features = run.features
    if device.consumes_counters_raw:
        if not features.PartitionableDevices:
            return False
        if not counters.try_consume(device, pool):
            return False
        counters.release(device, pool)
    return not features.ConsumableCapacity or run.capacity_fits(request, device_id, device)


def explain(
    allocator: Allocator,
    *,
    node: JSON | NodeInfo | None,
    claims: Sequence[JSON | ClaimInfo],
) -> list[RequestReport]:
    """Per request, the filter funnel on this node; an input error gives one report saying so."""
    try:
        run = allocator.new_run(node, claims)
        run.prepare()
    except AllocationError as exc:
        return [RequestReport(claim="", request="", wanted=0, message=f"error: {exc}")]
    reports = [_funnel(run, key, data) for key, data in sorted(run.request_data.items())]
    blocked = [r for r in reports if r.blocking_stage]
    if not blocked and reports:
        invalid = [p.pool_id for p in run.pools if p.is_invalid]
        incomplete = [p.pool_id for p in run.pools if p.is_incomplete]
        note = "each request has enough devices on its own; together they do not fit"
        if invalid:
            note += f"; invalid pools: {', '.join(invalid)}"
        if incomplete:
            note += f"; incomplete pools: {', '.join(incomplete)}"
        for report in reports:
            report.message = f"{report.message}; {note}"
    return reports


def explain_scenario(
    scenario: Mapping[str, Any],
    output: Mapping[str, Any],
    *,
    selector_cache: SelectorCache | None = None,
) -> Any:
    """Reports for each node where the claims did not fit (no results and no error)."""
    try:
        allocator = allocator_from_scenario(scenario, selector_cache=selector_cache)
    except AllocationError:
        return None
    claims = list(scenario.get("claims") or [])
    if "nodes" in output:
        result = {}
        for node, entry in zip(scenario.get("nodes") or [], output["nodes"], strict=False):
            if entry.get("results") is None and not entry.get("error"):
                result[entry["node"]] = [
                    r.as_dict() for r in explain(allocator, node=node, claims=claims)
                ]
        return result
    if output.get("results") is None and not output.get("error"):
        return [r.as_dict() for r in explain(allocator, node=scenario.get("node"), claims=claims)]
    return None
