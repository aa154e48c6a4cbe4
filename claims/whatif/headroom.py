"""Headroom and stranded devices: copies of the claims placed first-fit until the cluster is full.

Each placed copy is recorded on the simulation's allocator incrementally, so a copy costs about
one allocation, not a rebuild of the allocated state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from claims.whatif.inputs import JSON, InputClaim
from claims.whatif.nodefit import NodeLedger, PodDemand
from claims.whatif.simulation import NodeVerdict, Simulation
from dashboard.gcpause import gc_paused
from dralib.allocator.nodeselection import NodeSelector

# progress(done, total, phase)
Progress = Callable[[int, int, str], None]

MAX_STRANDED_LISTED = 50


# Thousands of copies make many small containers and no reference cycle, yet the collections
# they set off walked the whole resident state: a third of a count=max at 5,000 nodes.
@gc_paused()
def place_copies(
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
    ledger: NodeLedger | None = None,
    demand: PodDemand | None = None,
) -> JSON:
    """Place up to `count` copies first-fit in node order, each seeing the ones before.

    Allocation only ever takes devices away, so a node found full stays full: the scan never
    goes back, and the total work is about one allocation per copy plus one per node. With a
    `ledger`, each copy also takes the pod's `demand` of its node (cpu, memory, pods, ports):
    a node whose room runs out is full too.
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
        if placed and ledger is not None and demand is not None and ledger.check(node, demand)[0]:
            verdicts[index].fits = False
            verdicts[index].results = None
            index += 1
            continue
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
        if ledger is not None and demand is not None:
            ledger.place(name, demand)
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


def stranded_devices(
    sim: Simulation,
    *,
    nodes: Sequence[JSON],
    verdicts: Sequence[NodeVerdict],
    headroom: JSON,
    claims: Sequence[JSON],
    room: Callable[[JSON], bool] | None = None,
) -> JSON:
    """Free devices of the claims' classes on nodes where no further copy fits, and the free
    physical units among them (a partitioned GPU counts once; see claims.devices.availability).

    The nodes that received copies are asked again (`room`: whether the node still has room for
    another copy's cpu, memory and ports); other nodes keep their verdict.
    """
    last_index = int(headroom["_lastIndex"])
    if not claims:
        return {"total": 0, "units": 0, "byNode": {}}
    expressions = sim.class_expressions(claims)
    placed_nodes = {p["node"] for p in headroom["placements"]}
    seen: set[str] = set()
    units: set[str] = set()
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
            fits = again.fits and (room is None or room(node))
        if fits:
            continue
        devices, free_units = sim.free_units(node, claims, expressions)
        free = [d for d in devices if d not in seen]
        seen.update(free)
        units.update(free_units)
        if free:
            total += len(free)
            if len(by_node) < MAX_STRANDED_LISTED:
                by_node[verdict.node] = free
    return {"total": total, "units": len(units), "byNode": by_node}
