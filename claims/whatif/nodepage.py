"""The part of a what-if answer that would grow with the cluster, cut to a window of nodes.

An answer holds per-node verdicts (`nodes`, `placements`, `headroom.placements`) for one window
of the nodes in name order (`nodesOffset`, `nodesLimit`; `nodesPage` says where it sits), and
`nodeGroups` for all of them: how many nodes fit, and how many each reason removes. Counts in
`summary` stay over every node. A question asked page after page walks every node exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from claims.whatif.inputs import JSON
from claims.whatif.nodefit import status_reasons
from claims.whatif.simulation import CANNOT_ALLOCATE, NOT_EVALUATED, NodeVerdict

__all__ = ["MAX_NODE_GROUPS", "NodeWindow", "empty_page", "node_groups", "window_copies"]

# Distinct reasons listed in `nodeGroups`; the rest are counted in one last entry. Reasons are
# few in practice (a filter's words, the DynamicResources filter's), but an error message may
# name a node or device.
MAX_NODE_GROUPS = 20
# Nodes named per group, so that one can be asked about (`nodes: [...]`) or looked at.
FIRST_NODES = 3
DYNAMIC_RESOURCES = "DynamicResources"


@dataclass(frozen=True)
class NodeWindow:
    """Nodes `offset` to `offset + limit` (all from `offset` when `limit` is None) of `total`."""

    offset: int
    limit: int | None
    total: int

    @property
    def start(self) -> int:
        return min(self.offset, self.total)

    @property
    def stop(self) -> int:
        return self.total if self.limit is None else min(self.total, self.offset + self.limit)

    def page(self) -> JSON:
        """`nodesPage`: where the window sits; `next` is the next page's offset or None."""
        return {
            "offset": self.offset,
            "limit": self.limit,
            "total": self.total,
            "returned": max(0, self.stop - self.start),
            "next": self.stop if self.stop < self.total else None,
        }


def empty_page(offset: int, limit: int | None) -> JSON:
    """`nodesPage` of an answer that asked no node (nothing simulated)."""
    return NodeWindow(offset, limit, 0).page()


def window_copies(headroom: JSON, *, window: NodeWindow, names: Sequence[str]) -> JSON:
    """`headroom` with `placements` cut to the window's nodes (in the order copies were placed)
    and `placementsTotal` counting every node that took copies."""
    shown = set(names[window.start : window.stop])
    placements = headroom.get("placements") or []
    return {
        **headroom,
        "placements": [p for p in placements if p["node"] in shown],
        "placementsTotal": len(placements),
    }


def _reasons(verdict: NodeVerdict, node_filter: tuple[str, str]) -> list[tuple[str, str]]:
    """(filter, reason) pairs that keep the pod off this node, counted as FitError counts them.

    A node past the other filters is said in the what-if's own words (an error, an allocated
    claim pinned elsewhere, or the DynamicResources filter's "cannot allocate all claims"),
    without allocating again as the scheduler's message for a pod that fits nowhere does
    (`engine.unschedulable_message`).
    """
    if node_filter[0]:
        return [(node_filter[0], reason) for reason in status_reasons(*node_filter)]
    if verdict.skipped:
        return [("", NOT_EVALUATED)]
    if verdict.error:
        return [(DYNAMIC_RESOURCES, verdict.error)]
    if verdict.pinned_out:
        return [(DYNAMIC_RESOURCES, verdict.pinned_out)]
    return [(DYNAMIC_RESOURCES, CANNOT_ALLOCATE)]


def node_groups(verdicts: Sequence[NodeVerdict], filters: Sequence[tuple[str, str]]) -> list[JSON]:
    """The nodes the pod fits on, then per (filter, reason) the nodes it removes, most first.

    Each group: {fits, filter, reason, nodes (count), firstNodes (up to FIRST_NODES names)}.
    `fits` is the pod's fit (devices and every filter), the first group's only; a node that
    several NodeResourcesFit reasons remove is counted under each, as FitError counts. Past
    MAX_NODE_GROUPS groups, the rest are one last group whose reason says how many it joins.
    """
    counts: Counter[tuple[bool, str, str]] = Counter()
    first: dict[tuple[bool, str, str], list[str]] = {}
    for verdict, node_filter in zip(verdicts, filters, strict=True):
        if verdict.fits and not node_filter[0]:
            keys = [(True, "", "")]
        else:
            keys = [(False, f, r) for f, r in _reasons(verdict, node_filter)]
        for key in keys:
            counts[key] += 1
            names = first.setdefault(key, [])
            if len(names) < FIRST_NODES:
                names.append(verdict.node)
    ordered = sorted(counts, key=lambda k: (not k[0], -counts[k], k[1], k[2]))
    groups = [
        {"fits": k[0], "filter": k[1], "reason": k[2], "nodes": counts[k], "firstNodes": first[k]}
        for k in ordered[:MAX_NODE_GROUPS]
    ]
    rest = ordered[MAX_NODE_GROUPS:]
    if rest:
        groups.append(
            {
                "fits": False,
                "filter": "",
                "reason": f"{len(rest)} other reasons",
                "nodes": sum(counts[k] for k in rest),
                "firstNodes": [],
            }
        )
    return groups
