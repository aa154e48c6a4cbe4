"""The what-if computation: per-node fit, headroom by repeated allocation, stranded devices.

`Simulation` builds one `Allocator` for a `ClusterView` and asks it node after node, as the
scheduler's filter does, so parsed slices, built pools and selector results are shared by all
nodes (and, for headroom, by all copies). Nothing here writes to the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    DeviceID,
    Features,
    NodeAllocationError,
    NodeInfo,
)
from claims.allocator.explain import STAGES, RequestReport, explain
from claims.allocator.nodeselection import NodeSelector, node_matches
from claims.whatif.inputs import JSON, InputClaim, WhatIfError, field_of_allocation_error
from claims.whatif.options import Options
from claims.whatif.state import ClusterView, selector_cache

# progress(done, total, phase)
Progress = Callable[[int, int, str], None]

BEST_NODES = 3
MAX_STRANDED_LISTED = 50


@dataclass
class NodeVerdict:
    """Whether the claims fit on one node, with devices or reasons."""

    node: str
    schedulable: bool
    fits: bool
    results: list[JSON] | None = None
    reports: list[RequestReport] = field(default_factory=list)
    error: str = ""
    pinned_out: str = ""

    def score(self) -> float:
        """How close a failing node came: later blocking stages, more devices left: higher."""
        if self.error or self.pinned_out:
            return -1.0
        total = 0.0
        for report in self.reports:
            if not report.blocking_stage:
                total += len(STAGES)
                continue
            stage_index = STAGES.index(report.blocking_stage)
            left = next(s.remaining for s in report.stages if s.stage == report.blocking_stage)
            total += stage_index + (left / report.wanted if report.wanted else 0.0)
        return total


@dataclass
class IndexedAllocatedState(AllocatedState):
    """AllocatedState whose "is any share of this device allocated" is a set lookup.

    The base class scans every shared allocation per question, which dominates on clusters with
    thousands of shared devices; placements are only ever added through `add_allocated_claims`.
    """

    def __post_init__(self) -> None:
        self._shared_base = {shared[:3] for shared in self.allocated_shared_device_ids}

    def is_device_allocated(self, device_id: DeviceID) -> bool:
        return (
            device_id in self.allocated_devices
            or device_id in self.aggregated_capacity
            or device_id in self._shared_base
        )

    def add_allocated_claims(self, claims: Iterable[JSON], *, consumable_capacity: bool) -> None:
        super().add_allocated_claims(claims, consumable_capacity=consumable_capacity)
        self._shared_base = {shared[:3] for shared in self.allocated_shared_device_ids}

    def copy(self) -> IndexedAllocatedState:
        return IndexedAllocatedState(
            allocated_devices=set(self.allocated_devices),
            allocated_shared_device_ids=set(self.allocated_shared_device_ids),
            aggregated_capacity={k: dict(v) for k, v in self.aggregated_capacity.items()},
        )


def _tolerates(tolerations: Sequence[JSON], taint: JSON) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        operator = toleration.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_schedulable(node: JSON, tolerations: Sequence[JSON]) -> bool:
    """Not cordoned, Ready, and no NoSchedule/NoExecute taint the pod does not tolerate."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return False
    return all(
        _tolerates(tolerations, taint)
        for taint in spec.get("taints") or []
        if taint.get("effect") in {"NoSchedule", "NoExecute"}
    )


def flatten_devices(claim_ref: str, allocation: JSON) -> list[JSON]:
    """The devices of one AllocationResult, one entry per result, with the claim's name."""
    out = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        # Every field of the result (tolerations, binding conditions, capacity, share ID).
        entry = {"claim": claim_ref, **result}
        out.append(entry)
    return out


def report_dict(report: RequestReport) -> JSON:
    """A compact request report: stages as a list the templates render."""
    return {
        "claim": report.claim,
        "request": report.request,
        "wanted": report.wanted,
        "stage": report.blocking_stage,
        "reason": report.message,
        "stages": [{"stage": s.stage, "remaining": s.remaining} for s in report.stages],
    }


class Simulation:
    """One allocator over one cluster view, asked for any number of claim sets."""

    def __init__(self, view: ClusterView, *, features: Features) -> None:
        self.view = view
        self.features = features
        self.class_names = {str((c.get("metadata") or {}).get("name")) for c in view.classes}
        state = IndexedAllocatedState()
        try:
            state.add_allocated_claims(
                view.allocated_claims, consumable_capacity=features.ConsumableCapacity
            )
            self.allocator = Allocator(
                classes=view.classes,
                slices=view.slices,
                features=features,
                allocated_state=state,
                selector_cache=selector_cache(
                    consumable_capacity=features.ConsumableCapacity,
                    list_type_attributes=features.ListTypeAttributes,
                ),
                slice_cache=view.slice_cache,
            )
        except AllocationError as exc:
            # The stored cluster itself is malformed (a slice the allocator cannot read).
            raise WhatIfError("cluster", str(exc)) from exc
        self._base_state = state
        # A simulation is reused by later requests on the same view; one user at a time.
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget placements recorded since construction: back to the cluster's allocations."""
        self.allocator.allocated_state = self._base_state.copy()
        self.allocator._counter_cache.clear()  # noqa: SLF001

    def check_classes(self, claims: Iterable[InputClaim]) -> None:
        """Unknown DeviceClass names are input errors, as the scheduler would report them."""
        for claim in claims:
            requests = ((claim.obj.get("spec") or {}).get("devices") or {}).get("requests") or []
            for r_index, request in enumerate(requests):
                views = []
                if request.get("exactly") is not None:
                    views.append((f"requests[{r_index}].exactly", request["exactly"]))
                for s_index, sub in enumerate(request.get("firstAvailable") or []):
                    views.append((f"requests[{r_index}].firstAvailable[{s_index}]", sub))
                for path, view in views:
                    name = (view or {}).get("deviceClassName")
                    if name not in self.class_names:
                        raise WhatIfError(
                            f"{claim.source}: spec.devices.{path}.deviceClassName",
                            f"DeviceClass {name!r} not found",
                        )

    def record(self, claims: Sequence[JSON], results: Sequence[JSON]) -> None:
        """Count a placement as allocated so the next question sees it."""
        allocated = [
            {**claim, "status": {"allocation": result}}
            for claim, result in zip(claims, results, strict=True)
        ]
        self.allocator.allocated_state.add_allocated_claims(
            allocated, consumable_capacity=self.features.ConsumableCapacity
        )
        # Available counters are cached per pool from the allocated state: recompute them.
        self.allocator._counter_cache.clear()  # noqa: SLF001

    def verdict(
        self,
        node: JSON,
        claims: Sequence[JSON],
        *,
        schedulable: bool,
        pins: Sequence[NodeSelector],
        inputs: Sequence[InputClaim],
        with_reasons: bool,
    ) -> NodeVerdict:
        """Allocate on one node; explain the failure when asked."""
        name = str((node.get("metadata") or {}).get("name") or "")
        verdict = NodeVerdict(node=name, schedulable=schedulable, fits=False)
        info = NodeInfo.from_object(node)
        for pin in pins:
            try:
                allowed = node_matches(info, node_name="", all_nodes=False, selector=pin)
            except AllocationError:
                allowed = False
            if not allowed:
                verdict.pinned_out = "an existing claim of the pod is allocated for other nodes"
                return verdict
        if not claims:
            verdict.fits = True
            verdict.results = []
            return verdict
        try:
            results = self.allocator.allocate(info, claims)
        except NodeAllocationError as exc:
            verdict.error = str(exc)
            return verdict
        except AllocationError as exc:
            if "CEL runtime error" not in str(exc):
                raise WhatIfError(field_of_allocation_error(str(exc), inputs), str(exc)) from exc
            # A selector failing on one of this node's devices fails the node, as upstream's
            # filter does; the input itself was checked before.
            verdict.error = str(exc)
            return verdict
        if results is not None:
            verdict.fits = True
            verdict.results = results
        elif with_reasons:
            verdict.reports = explain(self.allocator, info, claims)
        return verdict

    def class_expressions(self, claims: Sequence[JSON]) -> list[tuple[str, ...]]:
        """Per class the claims ask for, its selector expressions."""
        wanted: set[str] = set()
        for claim in claims:
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                for view in [request.get("exactly"), *(request.get("firstAvailable") or [])]:
                    if view and view.get("deviceClassName"):
                        wanted.add(str(view["deviceClassName"]))
        out = []
        for device_class in self.view.classes:
            if str((device_class.get("metadata") or {}).get("name")) in wanted:
                selectors = (device_class.get("spec") or {}).get("selectors") or []
                out.append(
                    tuple(str((s.get("cel") or {}).get("expression", "")) for s in selectors)
                )
        return out

    def free_devices(
        self, node: JSON, claims: Sequence[JSON], expressions: Sequence[tuple[str, ...]]
    ) -> list[str]:
        """Free devices on the node that one of the claims' classes would accept."""
        run = self.allocator.new_run(NodeInfo.from_object(node), claims)
        cache = self.allocator.selector_cache
        is_allocated = self.allocator.allocated_state.is_device_allocated
        free: list[str] = []
        for pool in run.pools:
            if pool.is_incomplete or pool.is_invalid:
                continue
            for info in pool.slices:
                for device in info.devices:
                    if is_allocated((info.driver, info.pool, device.name)):
                        continue
                    if any(_all_match(cache, exprs, device) for exprs in expressions):
                        free.append(f"{info.driver}/{info.pool}/{device.name}")
        return free


def _all_match(cache: Any, expressions: Sequence[str], device: Any) -> bool:
    try:
        return all(cache.matches(expression, device) for expression in expressions)
    except Exception:  # a class selector failing on a device just means "not this class"
        return False


def claim_objects(claims: Sequence[InputClaim]) -> tuple[list[JSON], list[JSON], list[JSON]]:
    """(claims for the first copy, claims for later copies, nodeSelectors of allocated ones)."""
    first: list[JSON] = []
    per_copy: list[JSON] = []
    pins: list[JSON] = []
    for claim in claims:
        allocation = (claim.obj.get("status") or {}).get("allocation")
        if claim.existing and allocation:
            if allocation.get("nodeSelector"):
                pins.append(allocation["nodeSelector"])
            continue
        body = {k: v for k, v in claim.obj.items() if k != "status"}
        first.append(body)
        if not claim.existing:
            per_copy.append(body)
    return first, per_copy, pins


def parse_pins(raw: Sequence[JSON]) -> list[NodeSelector]:
    return [NodeSelector(selector) for selector in raw]


def evaluate(
    sim: Simulation,
    claims: Sequence[InputClaim],
    *,
    options: Options,
    tolerations: Sequence[JSON],
    progress: Progress | None = None,
    with_stranded: bool = True,
) -> JSON:
    """The what-if answer for already parsed claims (see `claims.services.what_if`)."""
    sim.reset()
    sim.check_classes(claims)
    nodes = select_nodes(sim.view.nodes, options)
    first_claims, copy_claims, raw_pins = claim_objects(claims)
    pins = parse_pins(raw_pins)
    refs = [
        f"{(c.get('metadata') or {}).get('namespace', '')}/{(c.get('metadata') or {}).get('name')}"
        for c in first_claims
    ]
    verdicts: list[NodeVerdict] = []
    total = len(nodes)
    for index, node in enumerate(nodes):
        verdicts.append(
            sim.verdict(
                node,
                first_claims,
                schedulable=node_schedulable(node, tolerations),
                pins=pins,
                inputs=claims,
                with_reasons=options.explain,
            )
        )
        if progress is not None and (index + 1) % 50 == 0:
            progress(index + 1, total, "nodes")
    if progress is not None:
        progress(total, total, "nodes")
    node_entries = [_node_entry(v, refs) for v in verdicts]
    fitting = [v for v in verdicts if v.fits]
    first = next((v for v in fitting if v.schedulable), None)
    headroom = _headroom(
        sim,
        nodes=nodes,
        verdicts=verdicts,
        first_claims=first_claims,
        copy_claims=copy_claims,
        pins=pins,
        inputs=claims,
        count=options.count,
        progress=progress,
    )
    stranded = (
        _stranded(sim, nodes=nodes, verdicts=verdicts, headroom=headroom, claims=first_claims)
        if with_stranded
        else None
    )
    headroom.pop("_lastIndex", None)
    failing = sorted((v for v in verdicts if not v.fits), key=lambda v: (-v.score(), v.node))[
        :BEST_NODES
    ]
    best = [_best_entry(v) for v in failing]
    reasons = [] if fitting else _reason_lines(failing)
    return {
        "fits": first is not None,
        "nodes": node_entries,
        "placements": [
            {
                "node": v.node,
                "devices": [d for e in _claim_entries(v, refs) for d in e["devices"]],
                "claims": _claim_entries(v, refs),
            }
            for v in fitting
            if v.schedulable
        ],
        "summary": {
            "nodesChecked": len(verdicts),
            "nodesFit": len(fitting),
            "nodesFitSchedulable": sum(1 for v in fitting if v.schedulable),
            "firstNode": first.node if first else None,
            "headroom": headroom["placed"],
            "count": options.count,
            "countCapped": options.count_capped,
            "stranded": stranded,
        },
        "headroom": headroom,
        "reasons": reasons,
        "best": best,
        "diagnosis": _diagnosis_shape(failing, reasons) if not fitting else None,
    }


def select_nodes(nodes: Sequence[JSON], options: Options) -> list[JSON]:
    """The nodes named or selected, in the scheduler's (name) order."""
    by_name = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    if options.nodes is not None:
        unknown = [name for name in options.nodes if name not in by_name]
        if unknown:
            raise WhatIfError("nodes", f"unknown node(s): {', '.join(unknown[:10])}")
        chosen = [by_name[name] for name in sorted(options.nodes)]
    else:
        chosen = [by_name[name] for name in sorted(by_name)]
    if options.node_selector:
        chosen = [
            n
            for n in chosen
            if all(
                r.matches((n.get("metadata") or {}).get("labels") or {})
                for r in options.node_selector
            )
        ]
    return chosen


def _claim_entries(verdict: NodeVerdict, refs: Sequence[str]) -> list[JSON]:
    return [
        {
            "claim": ref,
            "devices": flatten_devices(ref, allocation),
            "nodeSelector": allocation.get("nodeSelector"),
        }
        for ref, allocation in zip(refs, verdict.results or [], strict=False)
    ]


def _node_entry(verdict: NodeVerdict, refs: Sequence[str]) -> JSON:
    entry: JSON = {"node": verdict.node, "schedulable": verdict.schedulable, "fits": verdict.fits}
    if verdict.fits:
        entry["claims"] = _claim_entries(verdict, refs)
    elif verdict.error:
        entry["error"] = verdict.error
    elif verdict.pinned_out:
        entry["error"] = verdict.pinned_out
    else:
        entry["reasons"] = [report_dict(r) for r in verdict.reports]
    return entry


def _best_entry(verdict: NodeVerdict) -> JSON:
    reasons = [
        {"claim": r.claim, "request": r.request, "stage": r.blocking_stage, "reason": r.message}
        for r in verdict.reports
    ]
    if verdict.error or verdict.pinned_out:
        reasons = [{"reason": verdict.error or verdict.pinned_out}]
    return {"node": verdict.node, "reasons": reasons}


def _reason_lines(failing: Sequence[NodeVerdict]) -> list[str]:
    lines = []
    for verdict in failing:
        if verdict.error or verdict.pinned_out:
            lines.append(f"{verdict.node}: {verdict.error or verdict.pinned_out}")
            continue
        for report in verdict.reports:
            if report.blocking_stage or len(verdict.reports) == 1:
                lines.append(f"{verdict.node}: {report.request}: {report.message}")
    return lines


def _diagnosis_shape(failing: Sequence[NodeVerdict], reasons: list[str]) -> JSON:
    best = failing[0] if failing else None
    return {
        "reasons": reasons,
        "node": best.node if best else None,
        "requests": [report_dict(r) for r in best.reports] if best else [],
    }


def _headroom(
    sim: Simulation,
    *,
    nodes: Sequence[JSON],
    verdicts: Sequence[NodeVerdict],
    first_claims: list[JSON],
    copy_claims: list[JSON],
    pins: list[NodeSelector],
    inputs: Sequence[InputClaim],
    count: int,
    progress: Progress | None,
) -> JSON:
    """Place up to `count` copies first-fit in node order, each seeing the ones before.

    Allocation only ever takes devices away, so a node found full stays full: the scan never
    goes back, and the total work is about one allocation per copy plus one per node.
    """
    placed_on: dict[str, int] = {}
    placed = 0
    index = 0
    claims_now = first_claims
    pins_now = list(pins)
    stopped = ""
    while placed < count:
        while index < len(nodes) and not (verdicts[index].fits and verdicts[index].schedulable):
            index += 1
        if index >= len(nodes):
            stopped = "no schedulable node has room for another copy"
            break
        node = nodes[index]
        if placed == 0:
            results = verdicts[index].results or []
        else:
            verdict = sim.verdict(
                node,
                claims_now,
                schedulable=True,
                pins=pins_now,
                inputs=inputs,
                with_reasons=False,
            )
            if not verdict.fits:
                verdicts[index].fits = False
                verdicts[index].results = None
                index += 1
                continue
            results = verdict.results or []
        if claims_now:
            sim.record(claims_now, results)
        if placed == 0 and claims_now is not copy_claims:
            # Claims shared by all copies (a pod's existing claims) now pin later copies.
            for claim, result in zip(claims_now, results, strict=True):
                if claim not in copy_claims and result.get("nodeSelector"):
                    pins_now.append(NodeSelector(result["nodeSelector"]))
            claims_now = copy_claims
        placed += 1
        name = str((node.get("metadata") or {}).get("name"))
        placed_on[name] = placed_on.get(name, 0) + 1
        if progress is not None and placed % 100 == 0:
            progress(placed, count, "copies")
    if placed >= count:
        stopped = "all requested copies placed"
    return {
        "requested": count,
        "placed": placed,
        "placements": [{"node": n, "copies": c} for n, c in placed_on.items()],
        "stoppedBecause": stopped,
        "exhausted": placed < count,
        "_lastIndex": index,
    }


def _stranded(
    sim: Simulation,
    *,
    nodes: Sequence[JSON],
    verdicts: Sequence[NodeVerdict],
    headroom: JSON,
    claims: Sequence[JSON],
) -> JSON:
    """Free devices of the claims' classes on nodes where no further copy fits.

    The nodes that received copies are asked again; other nodes keep their verdict.
    """
    last_index = int(headroom["_lastIndex"])
    if not claims:
        return {"total": 0, "byNode": {}}
    expressions = sim.class_expressions(claims)
    placed_nodes = {p["node"] for p in headroom["placements"]}
    seen: set[str] = set()
    by_node: dict[str, list[str]] = {}
    total = 0
    for index, (node, verdict) in enumerate(zip(nodes, verdicts, strict=True)):
        fits = verdict.fits
        if headroom["exhausted"] or index < last_index:
            fits = False
        elif verdict.node in placed_nodes:
            again = sim.verdict(
                node, claims, schedulable=True, pins=[], inputs=[], with_reasons=False
            )
            fits = again.fits
        if fits:
            continue
        free = [d for d in sim.free_devices(node, claims, expressions) if d not in seen]
        seen.update(free)
        if free:
            total += len(free)
            if len(by_node) < MAX_STRANDED_LISTED:
                by_node[verdict.node] = free
    return {"total": total, "byNode": by_node}
