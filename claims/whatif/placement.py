"""Pods placed one after another, as the scheduler does: each sees the devices the previous took.

For every pod, in input order: a pod ResourceQuota admission refuses fails it, as do claims the
API server would refuse and a claim already reserved for the limit of consumers
(`status.reservedFor`); then the nodes are tried in name order, the scheduler's node filters
first (`nodefilter`), then NodePorts and NodeResourcesFit against what runs on the node
(`nodefit`), then the allocator; the first node that fits takes the pod: its requests and ports
count on that node, and its claims' devices as allocated, for the pods after it. A claim
an earlier pod got allocated (a shared `resourceClaimName`) is not allocated again: it pins later
pods to its node selector. The scheduler scores nodes and may pick another one; first-fit in name
order is the dashboard's deterministic stand-in. In gang mode (`gang: true`) all the input's
claims are allocated together on one node (all or nothing) and each pod reports that placement.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from claims.whatif.engine import (
    BEST_NODES,
    Progress,
    best_entry,
    claim_entry,
    parse_pins,
    reason_lines,
    unschedulable_message,
)
from claims.whatif.inputs import JSON, InputClaim
from claims.whatif.nodefit import NodeLedger, PodDemand, status_reasons
from claims.whatif.pods import InputPod, distinct_claims
from claims.whatif.simulation import NodeVerdict, Simulation
from claims.whatif.workloads import DAEMONSET_TOLERATIONS, MAX_PODS
from dralib.allocator.nodeselection import NodeSelector

# Nodes listed per pod under `filtered` (the counts per filter cover all of them).
MAX_FILTERED_LISTED = 20


def reserved_for(claim: InputClaim) -> int:
    """How many consumers the claim is reserved for already."""
    return len(((claim.obj.get("status") or {}).get("reservedFor")) or [])


def expand_daemons(pods: Sequence[InputPod], nodes: Sequence[JSON]) -> tuple[list[InputPod], str]:
    """A DaemonSet's pod becomes one pod per node that passes its filters (with the controller's
    tolerations), pinned there; returns the pods and a note when the cap cut them short."""
    out: list[InputPod] = []
    note = ""
    for pod in pods:
        if not pod.per_node:
            out.append(pod)
            continue
        base = replace(
            pod.node_filter, tolerations=[*pod.node_filter.tolerations, *DAEMONSET_TOLERATIONS]
        )
        for node in nodes:
            if base.check(node)[0]:
                continue
            if len(out) >= MAX_PODS:
                note = f"at most {MAX_PODS} pods: the DaemonSet {pod.name} was cut short"
                break
            node_name = str((node.get("metadata") or {}).get("name"))
            name = f"{pod.name}-{node_name}"
            out.append(
                replace(
                    pod,
                    name=name,
                    per_node=False,
                    # The DaemonSet controller pins its pods with required node affinity on
                    # metadata.name (ReplaceDaemonSetPodNodeNameNodeAffinity), not nodeName.
                    node_filter=replace(base, node_names=frozenset({node_name})),
                    claims=[_renamed(c, pod=pod, name=name) for c in pod.claims],
                )
            )
    return out, note


def _renamed(claim: InputClaim, *, pod: InputPod, name: str) -> InputClaim:
    """A claim made for the pod (from a template, or the implicit one) renamed for a copy."""
    meta = claim.obj.get("metadata") or {}
    own = str(meta.get("name") or "")
    if claim.existing or not own.startswith(f"{pod.name}-"):
        return claim
    obj = copy.deepcopy(claim.obj)
    obj["metadata"]["name"] = name + own[len(pod.name) :]
    return replace(claim, obj=obj)


def _body(claim: InputClaim) -> JSON:
    return {k: v for k, v in claim.obj.items() if k != "status"}


def _pod_entry(pod: InputPod) -> JSON:
    return {
        "pod": pod.ref,
        "source": pod.source,
        "workload": pod.workload,
        "fits": False,
        "node": None,
        "claims": [],
        "filtered": {"counts": {}, "nodes": []},
        "reasons": [],
        "best": [],
    }


def _filtered(entry: JSON, node: str, found: tuple[str, str]) -> None:
    counts = entry["filtered"]["counts"]
    counts[found[0]] = counts.get(found[0], 0) + 1
    if len(entry["filtered"]["nodes"]) < MAX_FILTERED_LISTED:
        entry["filtered"]["nodes"].append({"node": node, "filter": found[0], "reason": found[1]})


def place_pods(
    sim: Simulation,
    pods: Sequence[InputPod],
    *,
    nodes: Sequence[JSON],
    refused: Mapping[str, str],
    reserved_limit: int,
    explain: bool,
    progress: Progress | None = None,
    ledger: NodeLedger | None = None,
    demands: Sequence[PodDemand] | None = None,
    over_quota: Mapping[int, str] | None = None,
) -> list[JSON]:
    """One answer per pod, in order; placements are recorded on the simulation as they happen.

    With a `ledger`, each pod's `demands` entry is checked against what its node still has
    (NodePorts, NodeResourcesFit) and taken from it once the pod is placed. A pod in
    `over_quota` (index -> the API server's refusal) is refused before any node is tried.
    """
    # Keyed by the claim object: two pods naming one claim share the object.
    allocated: dict[int, JSON] = {}
    consumers: dict[int, int] = {}
    # A failing pod's claims and filters -> the nodes that came closest, to explain a later pod
    # with the same spec on those nodes only (each answer still names its own claims).
    closest: dict[str, list[JSON]] = {}
    answers = []
    for index, pod in enumerate(pods):
        entry = _pod_entry(pod)
        answers.append(entry)
        distinct = distinct_claims([pod])
        blocked = [refused[c.ref] for c in distinct if c.ref in refused]
        full = [
            f"ResourceClaim {c.ref} is reserved for the maximum of {reserved_limit} consumers"
            for c in distinct
            if consumers.get(id(c), reserved_for(c)) >= reserved_limit
        ]
        quota = [over_quota[index]] if over_quota and index in over_quota else []
        if blocked or full or quota:
            entry["reasons"] = [*quota, *blocked, *full]
            continue
        demand = demands[index] if demands is not None else None
        new: list[InputClaim] = []
        pins: list[JSON] = []
        shared: dict[int, JSON] = {}
        for claim in distinct:
            if claim.classic:
                continue
            earlier = allocated.get(id(claim))
            if earlier is None and claim.existing:
                earlier = (claim.obj.get("status") or {}).get("allocation")
            if earlier is not None:
                shared[id(claim)] = earlier
                if earlier.get("nodeSelector"):
                    pins.append(earlier["nodeSelector"])
            else:
                new.append(claim)
        bodies = [_body(c) for c in new]
        pinned = parse_pins(pins)
        passing: list[JSON] = []
        candidates: list[tuple[JSON, NodeVerdict]] = []
        filtered: list[str] = []
        for node in nodes:
            name = str((node.get("metadata") or {}).get("name"))
            found = pod.node_filter.check(node)
            if not found[0] and ledger is not None and demand is not None:
                found = ledger.check(node, demand)
            if found[0]:
                _filtered(entry, name, found)
                filtered.extend(status_reasons(*found))
                continue
            verdict = sim.verdict(
                node, bodies, schedulable=True, pins=pinned, inputs=new, with_reasons=False
            )
            if not verdict.fits:
                passing.append(node)
                candidates.append((node, verdict))
                continue
            results = verdict.results or []
            if bodies:
                sim.record(bodies, results)
            for claim, result in zip(new, results, strict=True):
                allocated[id(claim)] = result
            mine = {id(c): r for c, r in zip(new, results, strict=True)}
            if ledger is not None and demand is not None:
                ledger.place(name, demand)
            entry["fits"] = True
            entry["node"] = name
            entry["claims"] = [
                {
                    **claim_entry(c.ref, mine.get(id(c)) or shared.get(id(c)) or {}),
                    "shared": id(c) in shared,
                    "driverAllocated": c.classic,
                }
                for c in distinct
            ]
            for claim in distinct:
                consumers[id(claim)] = consumers.get(id(claim), reserved_for(claim)) + 1
            break
        else:
            _explain(sim, entry, pod, bodies, new, pinned, passing, closest, explain)
            summary = unschedulable_message(
                sim, total=len(nodes), filtered=filtered, candidates=candidates, claims=bodies
            )
            entry["reasons"].insert(0, summary)
        if progress is not None:
            progress(index + 1, len(pods), "pods")
    return answers


def _spec_key(pod: InputPod, bodies: Sequence[JSON], pins: Sequence[JSON]) -> str:
    specs = [b.get("spec") for b in bodies]
    node_filter = pod.node_filter
    text = json.dumps(
        [
            specs,
            node_filter.node_name,
            node_filter.node_selector,
            node_filter.affinity.raw if node_filter.affinity is not None else None,
            node_filter.tolerations,
            pins,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _explain(
    sim: Simulation,
    entry: JSON,
    pod: InputPod,
    bodies: list[JSON],
    new: list[InputClaim],
    pins: list[NodeSelector],
    passing: list[JSON],
    closest: dict[str, list[JSON]],
    explain: bool,
) -> None:
    """Reasons for a pod no node took: its closest nodes, each explained for its own claims."""
    if not explain or not passing:
        return
    key = _spec_key(pod, bodies, [p.raw for p in pins])
    candidates = closest.get(key, passing)
    verdicts: list[NodeVerdict] = [
        sim.verdict(node, bodies, schedulable=True, pins=pins, inputs=new, with_reasons=True)
        for node in candidates
    ]
    failing = sorted(verdicts, key=lambda v: (-v.score(), v.node))[:BEST_NODES]
    by_name = {str((n.get("metadata") or {}).get("name")): n for n in candidates}
    closest[key] = [by_name[v.node] for v in failing]
    entry["best"] = [best_entry(v) for v in failing]
    entry["reasons"] = reason_lines(failing)


def gang_pods(answer: JSON, pods: Sequence[InputPod]) -> list[JSON]:
    """Per pod, the gang placement: the same node for all, each pod's own claims."""
    # The first pick, which the answer's window of `placements` may not hold.
    placement = answer.get("firstPlacement")
    by_ref = {c["claim"]: c for c in (placement or {}).get("claims") or []}
    out = []
    for pod in pods:
        entry = _pod_entry(pod)
        if placement is not None:
            entry["fits"] = True
            entry["node"] = placement["node"]
            entry["claims"] = [
                {
                    **by_ref.get(
                        c.ref, {"claim": c.ref, "devices": [], "nodeSelector": None, "config": []}
                    ),
                    "shared": False,
                    "driverAllocated": c.classic,
                }
                for c in distinct_claims([pod])
            ]
        else:
            entry["reasons"] = list(answer.get("reasons") or [])
        out.append(entry)
    return out
