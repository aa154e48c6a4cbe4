"""The answer for parsed input over a cluster view: the gang's (or first pod's) fit on every node
with headroom and stranded devices, the pods placed in turn, quota admission, the API server's
checks and what was ignored. No database access of its own (the view reads the pods' topology
records when a spread constraint or affinity first needs them); `claims.whatif.service.what_if`
reads the inputs and calls `answer_for`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from claims.whatif.admission import api_server_checks, reserved_for_limit
from claims.whatif.engine import Progress, Simulation, evaluate, select_nodes
from claims.whatif.extended import class_mapping
from claims.whatif.inputs import JSON, InputClaim
from claims.whatif.nodefilter import check_all, not_modelled
from claims.whatif.nodefit import NodeLedger, PodDemand
from claims.whatif.nodepage import empty_page
from claims.whatif.options import Options
from claims.whatif.placement import expand_daemons, gang_pods, place_pods
from claims.whatif.podasks import PodAsks, pod_asks
from claims.whatif.pods import InputPod, ParsedInput, distinct_claims
from claims.whatif.preemption import PreemptionInputs, preempt
from claims.whatif.quota import (
    admission,
    admit_in_turn,
    creations,
    extended_resource_names,
)
from claims.whatif.state import ClusterView


def answer_for(
    parsed: ParsedInput,
    *,
    options: Options,
    view: ClusterView,
    quotas: Sequence[Any],
    limit_ranges: Mapping[str, Sequence[JSON]] | None = None,
    served_version: str = "",
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    progress: Progress | None = None,
    simulation: Simulation | None = None,
    preemption: PreemptionInputs | None = None,
) -> JSON:
    """The answer for parsed input over a cluster view (no database access of its own: the
    view reads the pods' topology records when a spread constraint or (anti-)affinity first
    needs them).

    `quotas`: the namespace's `QuotaObject`s (or (name, hard, used) of unscoped ones);
    `limit_ranges`: per namespace, its LimitRanges (their defaults apply to the input's pods);
    `namespaces` (name -> labels) are the namespaces whose labels are known; by default only
    the input's own Namespace documents. With `options.preemption` and the `preemption`
    inputs, a pod that fits nowhere gets the answer's `preemption` (`claims.whatif.preemption`).
    """
    sim = simulation or Simulation(view, features=options.feature_set())
    nodes = select_nodes(view.nodes, options)
    pods, cut_note = expand_daemons(parsed.pods, nodes)
    limit = reserved_for_limit(served_version)
    claims = distinct_claims(pods)
    known = parsed.namespaces if namespaces is None else namespaces
    refused, checks = api_server_checks(claims, namespaces=known, reserved_limit=limit)
    asks = pods_asks(pods, limit_ranges or {})
    gang = options.gang or len(pods) <= 1
    dra_backed = frozenset(class_mapping(view.classes))
    quota_entries = quota_creations(pods, asks, namespace=parsed.namespace)
    turns = admit_in_turn(
        creations(quota_entries, extended_names=extended_resource_names(view.classes)),
        quotas=quotas,
        extended=extended_resource_names(view.classes).values(),
    )
    # Pods the API server's quota admission refuses never reach the scheduler.
    over_quota = {
        index: turns[position]
        for position, index in enumerate(quota_pod_indexes(pods, namespace=parsed.namespace))
        if index is not None and turns[position]
    }
    # The top-level answer (per-node fit, headroom, stranded devices) is about the gang or the
    # first pod; `pods` then places every pod one after another.
    focus = pods if gang else pods[:1]
    focus_claims = distinct_claims(focus)
    simulated = [c for c in focus_claims if not c.classic]
    top = NodeLedger(view.usage, dra_backed=dra_backed, topology=view.topology(known))
    # A pod without claims is placed too; one whose claims are all classic is not simulated.
    if focus and (simulated or not focus_claims):
        filters = [p.node_filter for p in focus]
        demand = PodDemand.total(a.demand for a in asks[: len(focus)])

        # The other filters' results per node, kept for the same pod while nodes and pods do
        # not change: after a claim or slice changed, 5,000 nodes are not checked again.
        kept_checks = sim.remembered_checks(
            orjson.dumps(
                [[p.spec, p.namespace, p.labels] for p in focus] + [known, limit_ranges],
                option=orjson.OPT_SORT_KEYS,
                default=str,
            ).decode()
        )

        def node_check(node: JSON) -> tuple[str, str]:
            name = str((node.get("metadata") or {}).get("name") or "")
            kept = kept_checks.get(name) if kept_checks is not None else None
            if kept is not None and kept[0] is node:
                if kept[2]:
                    top.unknown_capacity.add(name)
                return kept[1]
            found = check_all(filters, node)
            result = found if found[0] else top.check(node, demand)
            if kept_checks is not None:
                kept_checks[name] = (node, result, name in top.unknown_capacity)
            return result

        # Preemption weighs every node, not the answer's window of them.
        every_node: list[JSON] | None = [] if options.preemption else None
        answer = evaluate(
            sim,
            simulated,
            options=options,
            node_check=node_check,
            progress=progress,
            ledger=top,
            demand=demand,
            entries_out=every_node,
        )
        sim.reset()
        # DefaultPreemption runs for one pod that no node takes.
        nowhere = not answer["summary"]["nodesFitSchedulable"]
        one_pod = len(focus) == 1 and not focus[0].implicit
        if every_node is not None and preemption is not None and one_pod and nowhere:
            answer["preemption"] = preempt(
                nodes,
                every_node,
                demand,
                spec=focus[0].spec,
                inputs=preemption,
                usage=view.usage,
                dra_backed=dra_backed,
                topology=view.topology(known),
            )
    else:
        answer = {
            "fits": None,
            "nodes": [],
            "nodesPage": empty_page(options.nodes_offset, options.nodes_limit),
            "placements": [],
            "firstPlacement": None,
            "nodeGroups": [],
            "summary": None,
            "headroom": None,
            "reasons": [
                "no pod to place"
                if not pods
                else "classic (v1alpha2) claims are allocated by their driver, not simulated"
            ],
            "best": [],
            "diagnosis": None,
        }
    placed = NodeLedger(view.usage, dra_backed=dra_backed, topology=view.topology(known))
    if gang:
        answer["pods"] = gang_pods(answer, pods)
    else:
        answer["pods"] = place_pods(
            sim,
            pods,
            nodes=nodes,
            refused=refused,
            reserved_limit=limit,
            explain=options.explain,
            progress=progress,
            ledger=placed,
            demands=[a.demand for a in asks],
            over_quota=over_quota,
        )
        if answer["fits"] is not None:
            answer["fits"] = all(p["fits"] for p in answer["pods"])
        answer["reasons"] = [
            *answer["reasons"],
            *(
                f"pod {p['pod']}: {line}"
                for p in answer["pods"][1:]
                if not p["fits"]
                for line in p["reasons"][:3]
            ),
        ]
    blocking = [refused[c.ref] for c in claims if c.ref in refused]
    if "preemption" in answer:
        # A pod the API server refuses never reaches the scheduler, nor its PostFilter.
        refusal = [refused[c.ref] for c in focus_claims if c.ref in refused]
        refusal += [over_quota[0]] if 0 in over_quota else []
        if refusal:
            answer["preemption"].update(
                node=None,
                victims=[],
                pdbViolations=0,
                message=f"the API server would refuse the pod first: {refusal[0]}",
            )
    if gang or 0 in over_quota:
        blocking += [f"pod {pods[i].ref}: {message}" for i, message in sorted(over_quota.items())]
    if blocking:
        answer["fits"] = False if answer["fits"] is not None else None
        answer["reasons"] = [*dict.fromkeys(blocking), *answer["reasons"]]
        if gang:
            for pod in answer["pods"]:
                pod.update(fits=False, node=None, claims=[], reasons=list(dict.fromkeys(blocking)))
    answer["quota"] = admission(
        claims,
        namespace=parsed.namespace,
        quotas=quotas,
        classes=view.classes,
        copies=options.count,
        pods=quota_entries,
    )
    answer["claims"] = [
        {
            "claim": c.ref,
            "source": c.source,
            "existing": c.existing,
            "driverAllocated": c.classic,
        }
        for c in claims
    ]
    answer["apiServer"] = {
        "checks": checks,
        "reservedForLimit": limit,
        "servedVersion": served_version,
    }
    answer["ignored"] = (
        list(parsed.ignored)
        + (
            [{"document": "", "kind": "DaemonSet", "name": "", "reason": cut_note}]
            if cut_note
            else []
        )
        + not_modelled(unknown_capacity=sorted(top.unknown_capacity | placed.unknown_capacity))
    )
    answer["gang"] = gang
    answer["driverAllocated"] = [c.ref for c in claims if c.classic]
    answer["simulated"] = answer["summary"] is not None
    answer["assumed"] = list(view.assumed)
    answer["namespace"] = parsed.namespace
    answer["fingerprint"] = view.fingerprint
    return answer


def pods_asks(
    pods: Sequence[InputPod], limit_ranges: Mapping[str, Sequence[JSON]]
) -> list[PodAsks]:
    """Per pod, what it asks once stored (its namespace's LimitRange defaults applied); the
    stand-in pod of claims without a pod asks nothing. Copies of one pod share the answer."""
    out: list[PodAsks] = []
    seen: dict[tuple[int, str, int], PodAsks] = {}
    for pod in pods:
        if pod.implicit:
            out.append(PodAsks.nothing())
            continue
        key = (id(pod.spec), pod.namespace, id(pod.labels))
        found = seen.get(key)
        if found is None:
            found = seen[key] = pod_asks(
                pod.spec,
                limit_ranges=limit_ranges.get(pod.namespace, ()),
                where=pod.source,
                namespace=pod.namespace,
                labels=pod.labels,
                node_filter=pod.node_filter,
            )
        out.append(found)
    return out


def quota_pod_indexes(pods: Sequence[InputPod], *, namespace: str) -> list[int | None]:
    """For each quota creation (see `quota_creations`), the index of its pod (None: claims
    created without a pod, or by a pod of another namespace)."""
    return [
        i if not pod.implicit and pod.namespace == namespace else None for i, pod in enumerate(pods)
    ]


def quota_creations(
    pods: Sequence[InputPod], asks: Sequence[PodAsks], *, namespace: str
) -> list[tuple[PodAsks | None, list[InputClaim]]]:
    """Per pod, what quota admission in `namespace` sees it create: the pod itself (when it is
    a pod of that namespace) and the claims it is first to use."""
    seen: set[int] = set()
    out: list[tuple[PodAsks | None, list[InputClaim]]] = []
    for pod, pod_asks_ in zip(pods, asks, strict=True):
        mine = [c for c in pod.claims if id(c) not in seen]
        seen.update(id(c) for c in mine)
        counted = not pod.implicit and pod.namespace == namespace
        out.append((pod_asks_ if counted else None, mine))
    return out
