"""The what-if computation: per-node fit, then headroom and stranded devices, shaped as the answer.

The parts live in `simulation` (one allocator asked node after node) and `headroom` (copies
placed until full); this module runs them for one question and builds the JSON answer. Nothing
here writes to the database.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from claims.whatif.headroom import Progress, place_copies, stranded_devices
from claims.whatif.inputs import JSON, InputClaim, WhatIfError
from claims.whatif.nodefilter import fit_error
from claims.whatif.nodefit import NodeLedger, PodDemand, status_reasons
from claims.whatif.nodepage import NodeWindow, node_groups, window_copies
from claims.whatif.options import Options
from claims.whatif.simulation import (
    NodeVerdict,
    Simulation,
    flatten_devices,
    report_dict,
)
from dralib.allocator.nodeselection import NodeSelector

# node -> (filter, reason) of the scheduler filter that removes it, ("", "") when none does.
NodeCheck = Callable[[JSON], tuple[str, str]]

BEST_NODES = 3

__all__ = [
    "BEST_NODES",
    "NodeVerdict",
    "Progress",
    "Simulation",
    "claim_objects",
    "evaluate",
    "claim_entries",
    "flatten_devices",
    "parse_pins",
    "report_dict",
    "select_nodes",
    "unschedulable_message",
]


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


def question_key(claims: Sequence[JSON], pins: Sequence[JSON], *, explain: bool) -> str:
    """What a node's first verdict depends on besides the cluster: the claims (without the uid a
    pasted claim is given anew on every parse: the allocator never reads it), pins, reasons."""
    bodies = [
        {**c, "metadata": {k: v for k, v in (c.get("metadata") or {}).items() if k != "uid"}}
        for c in claims
    ]
    return json.dumps([bodies, list(pins), explain], sort_keys=True, default=str)


def parse_pins(raw: Sequence[JSON]) -> list[NodeSelector]:
    return [NodeSelector(selector) for selector in raw]


def evaluate(
    sim: Simulation,
    claims: Sequence[InputClaim],
    *,
    options: Options,
    node_check: NodeCheck,
    progress: Progress | None = None,
    with_stranded: bool = True,
    ledger: NodeLedger | None = None,
    demand: PodDemand | None = None,
    entries_out: list[JSON] | None = None,
) -> JSON:
    """The what-if answer for already parsed claims (see `claims.whatif.service.what_if`).

    With a `ledger` and the pod's `demand`, each copy headroom places takes its share of its
    node (`node_check` is expected to check the first copy against the same ledger).

    `nodes` and `placements` hold the options' window of nodes only (`nodesPage`); counts,
    `nodeGroups`, headroom and `best` are over every node. `entries_out`, when given, receives
    every node's slim entry (name, fit, filter) for callers that need them all (preemption).
    """
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
    filters: list[tuple[str, str]] = []
    total = len(nodes)
    kept = sim.remembered(question_key(first_claims, raw_pins, explain=options.explain))
    for index, node in enumerate(nodes):
        name = str((node.get("metadata") or {}).get("name") or "")
        filters.append(node_check(node))
        schedulable = not filters[-1][0]
        known = kept.get(name) if kept is not None else None
        if known is not None:
            # A copy: headroom changes the verdicts it is given.
            verdicts.append(known.copy(schedulable=schedulable))
        else:
            verdict = sim.verdict(
                node,
                first_claims,
                schedulable=schedulable,
                pins=pins,
                inputs=claims,
                with_reasons=options.explain,
            )
            verdicts.append(verdict)
            if kept is not None and sim.gave_up is None:
                kept[name] = verdict.copy(schedulable=verdict.schedulable)
        if progress is not None and (index + 1) % 50 == 0:
            progress(index + 1, total, "nodes")
    if progress is not None:
        progress(total, total, "nodes")
    # Entries (devices flattened, reasons written) only for the window the answer shows; the
    # counts, headroom and best below read every verdict.
    window = NodeWindow(options.nodes_offset, options.nodes_limit, total)
    node_entries = [
        _node_entry(verdicts[i], refs, filters[i]) for i in range(window.start, window.stop)
    ]
    if entries_out is not None:
        entries_out.extend(_slim_entry(v, f) for v, f in zip(verdicts, filters, strict=True))
    fitting = [v for v in verdicts if v.fits]
    # Headroom marks nodes it filled as no longer fitting; placements list the first pass's.
    fitting_ids = {id(v) for v in fitting}
    first = next((v for v in fitting if v.schedulable), None)
    # Built now: headroom may take the node's devices from its verdict.
    first_placement = _first_placement(first, verdicts, filters, refs=refs)
    groups = node_groups(verdicts, filters)
    reasons: list[str] = []
    if first is None:
        # Before headroom, which places copies on the allocator's state.
        reasons.append(
            unschedulable_message(
                sim,
                total=total,
                filtered=(r for f in filters if f[0] for r in status_reasons(*f)),
                candidates=[
                    (node, v)
                    for node, v, f in zip(nodes, verdicts, filters, strict=True)
                    if not f[0] and not v.fits
                ],
                claims=first_claims,
            )
        )
    headroom = place_copies(
        sim,
        nodes=nodes,
        verdicts=verdicts,
        first_claims=first_claims,
        copy_claims=copy_claims,
        pins=pins,
        inputs=claims,
        count=options.count,
        progress=progress,
        ledger=ledger,
        demand=demand,
    )
    stranded = (
        stranded_devices(
            sim,
            nodes=nodes,
            verdicts=verdicts,
            headroom=headroom,
            claims=first_claims,
            room=(
                (lambda node: not ledger.check(node, demand)[0])
                if ledger is not None and demand is not None
                else None
            ),
        )
        if with_stranded
        else None
    )
    headroom.pop("_lastIndex", None)
    failing = sorted((v for v in verdicts if not v.fits), key=lambda v: (-v.score(), v.node))[
        :BEST_NODES
    ]
    best = [best_entry(v) for v in failing]
    if first is None:
        reasons.extend(reason_lines(failing))
    placements = [
        _placement(entry)
        for v, entry in zip(verdicts[window.start : window.stop], node_entries, strict=True)
        if id(v) in fitting_ids and v.schedulable
    ]
    headroom = window_copies(headroom, window=window, names=[v.node for v in verdicts])
    return {
        "fits": first is not None,
        "nodes": node_entries,
        "nodesPage": window.page(),
        "placements": placements,
        # Where the first pod goes (the scheduler's first pick), whichever window is shown.
        "firstPlacement": first_placement,
        "nodeGroups": groups,
        "summary": {
            "nodesChecked": len(verdicts),
            "nodesFit": len(fitting),
            "nodesFitSchedulable": sum(1 for v in fitting if v.schedulable),
            # Nodes the time budget left unasked (see the answer's gaveUp).
            "nodesNotEvaluated": sum(1 for v in verdicts if v.skipped),
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


def unschedulable_message(
    sim: Simulation,
    *,
    total: int,
    filtered: Iterable[str],
    candidates: Sequence[tuple[JSON, NodeVerdict]],
    claims: Sequence[JSON],
) -> str:
    """The scheduler's message for a pod that no node takes: each node's reason, the node
    filters' (`filtered`) or DynamicResources' for the nodes past them (`candidates`), counted
    as FitError.Error() counts them; or, when allocating failed with an error on one of those
    nodes, the error that ends the scheduler's attempt instead."""
    counts: Counter[str] = Counter(filtered)
    for node, verdict in candidates:
        reason, is_error = sim.filter_status(node, verdict, claims)
        if is_error:
            # framework.go RunFilterPlugins: a plugin's error status aborts the cycle.
            return f'running "DynamicResources" filter plugin: {reason}'
        counts[reason] += 1
    return fit_error(total, counts)


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


def claim_entry(ref: str, allocation: JSON) -> JSON:
    """One claim's allocation as the answer shows it: devices, nodeSelector and config."""
    return {
        "claim": ref,
        "devices": flatten_devices(ref, allocation),
        "nodeSelector": allocation.get("nodeSelector"),
        # As the allocator returns it: class config first, then the claim's, with their source.
        "config": (allocation.get("devices") or {}).get("config") or [],
    }


def claim_entries(results: Sequence[JSON] | None, refs: Sequence[str]) -> list[JSON]:
    return [
        claim_entry(ref, allocation) for ref, allocation in zip(refs, results or [], strict=False)
    ]


def _node_entry(verdict: NodeVerdict, refs: Sequence[str], node_filter: tuple[str, str]) -> JSON:
    entry: JSON = {"node": verdict.node, "schedulable": verdict.schedulable, "fits": verdict.fits}
    if node_filter[0]:
        entry["filter"] = {"filter": node_filter[0], "reason": node_filter[1]}
        reasons = status_reasons(*node_filter)
        if len(reasons) > 1:
            entry["filter"]["reasons"] = reasons
    if verdict.fits:
        entry["claims"] = claim_entries(verdict.results, refs)
    elif verdict.error:
        entry["error"] = verdict.error
    elif verdict.pinned_out:
        entry["error"] = verdict.pinned_out
    else:
        entry["reasons"] = [report_dict(r) for r in verdict.reports]
    return entry


def _placement(entry: JSON) -> JSON:
    # The node entry's claim entries, not copies: the same JSON, built once.
    return {
        "node": entry["node"],
        "devices": [d for e in entry["claims"] for d in e["devices"]],
        "claims": entry["claims"],
    }


def _first_placement(
    first: NodeVerdict | None,
    verdicts: Sequence[NodeVerdict],
    filters: Sequence[tuple[str, str]],
    *,
    refs: Sequence[str],
) -> JSON | None:
    if first is None:
        return None
    index = next(i for i, v in enumerate(verdicts) if v is first)
    return _placement(_node_entry(first, refs, filters[index]))


def _slim_entry(verdict: NodeVerdict, node_filter: tuple[str, str]) -> JSON:
    """What preemption reads of a node entry: its name, fit and filter (no devices)."""
    entry: JSON = {"node": verdict.node, "schedulable": verdict.schedulable, "fits": verdict.fits}
    if node_filter[0]:
        entry["filter"] = {"filter": node_filter[0], "reason": node_filter[1]}
    return entry


def best_entry(verdict: NodeVerdict) -> JSON:
    reasons = [
        {"claim": r.claim, "request": r.request, "stage": r.blocking_stage, "reason": r.message}
        for r in verdict.reports
    ]
    if verdict.error or verdict.pinned_out:
        reasons = [{"reason": verdict.error or verdict.pinned_out}]
    return {"node": verdict.node, "reasons": reasons}


def reason_lines(failing: Sequence[NodeVerdict]) -> list[str]:
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
