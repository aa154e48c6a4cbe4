"""Following the cluster: what changed between two views, and whose answers the change touches.

Reads of the database return the very same objects for rows that did not change (see
`claims.whatif.listing`), so two views are compared by object identity: a changed slice, node or
allocated claim is an object that is in one view and not in the other. From those, `view_change`
works out which nodes' answers may differ: the nodes that can see a changed slice's pool, the
nodes that can see the pools whose devices a changed claim holds, the nodes whose own object
changed. Everything else keeps the answer it had, which is what lets a what-if right after a
change ask the allocator again for one node instead of a thousand.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from claims.whatif.inputs import JSON
from claims.whatif.state import ClusterView

PoolKey = tuple[str, str]
# A device result as the allocated state counts it: driver, pool, device, share ID (or None).
HolderKey = tuple[str, str, str, str | None]


@dataclass
class ViewChange:
    """The difference between two views of the same cluster."""

    # The classes changed: nothing built for the old view is valid for the new one.
    rebuild: bool = False
    # Something every node reads changed (a pool shared by nodes): every answer may differ.
    every_node: bool = False
    nodes: set[str] = field(default_factory=set)
    slices_changed: bool = False
    nodes_changed: bool = False
    claims_gone: list[JSON] = field(default_factory=list)
    claims_new: list[JSON] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.rebuild
            or self.every_node
            or self.nodes
            or self.slices_changed
            or self.nodes_changed
            or self.claims_gone
            or self.claims_new
        )


def _name(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _only_in(first: Sequence[JSON], second: Sequence[JSON]) -> list[JSON]:
    present = {id(obj) for obj in second}
    return [obj for obj in first if id(obj) not in present]


def _differences(old: Sequence[JSON], new: Sequence[JSON]) -> tuple[list[JSON], list[JSON]]:
    """(objects only in `old`, objects only in `new`), by identity.

    Both lists are in the same (name) order and share every unchanged object, so only the part
    between their common head and tail is compared by sets: a change to one of 20,000 claims
    costs two walks of `is` checks instead of hashing every object twice.
    """
    shorter = min(len(old), len(new))
    head = 0
    while head < shorter and old[head] is new[head]:
        head += 1
    tail = 0
    while tail < shorter - head and old[-1 - tail] is new[-1 - tail]:
        tail += 1
    old_middle = old[head : len(old) - tail]
    new_middle = new[head : len(new) - tail]
    return _only_in(old_middle, new_middle), _only_in(new_middle, old_middle)


def pool_nodes(slices: Iterable[JSON]) -> dict[PoolKey, set[str] | None]:
    """Per pool, the nodes whose slices publish it; None when a slice of it is not node-local
    (nodeSelector, allNodes or per-device selection: any node may see it)."""
    out: dict[PoolKey, set[str] | None] = {}
    for obj in slices:
        spec = obj.get("spec") or {}
        key = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        node = spec.get("nodeName")
        seen = out.get(key, set())
        if seen is None:
            continue
        if node:
            seen.add(str(node))
            out[key] = seen
        else:
            out[key] = None
    return out


def claim_results(claim: JSON) -> list[JSON]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [r for r in results if isinstance(r, dict)]


def holder_keys(claim: JSON, *, consumable_capacity: bool) -> list[HolderKey]:
    """The devices (and shares) an allocated claim holds, as the allocated state counts them."""
    keys: list[HolderKey] = []
    for result in claim_results(claim):
        if result.get("adminAccess") is True:
            continue
        share = result.get("shareID") if consumable_capacity else None
        keys.append(
            (
                str(result.get("driver")),
                str(result.get("pool")),
                str(result.get("device")),
                str(share) if share is not None else None,
            )
        )
    return keys


def holders(claims: Iterable[JSON], *, consumable_capacity: bool) -> Counter[HolderKey]:
    """How many allocated claims hold each device (or share)."""
    counts: Counter[HolderKey] = Counter()
    for claim in claims:
        counts.update(holder_keys(claim, consumable_capacity=consumable_capacity))
    return counts


def view_change(old: ClusterView, new: ClusterView) -> ViewChange:
    """What differs between two views and which nodes' answers it may change."""
    change = ViewChange()
    if len(old.classes) != len(new.classes) or any(
        a is not b for a, b in zip(old.classes, new.classes, strict=True)
    ):
        change.rebuild = True
        change.every_node = True
        return change
    old_nodes = {_name(n): n for n in old.nodes}
    for node in new.nodes:
        name = _name(node)
        if old_nodes.pop(name, None) is not node:
            change.nodes.add(name)
            change.nodes_changed = True
    if old_nodes:
        # Removed nodes: nobody asks about them any more, but the allocator must forget them.
        change.nodes.update(old_nodes)
        change.nodes_changed = True
    old_only, new_only = _differences(old.slices, new.slices)
    changed_slices = [*old_only, *new_only]
    gone, arrived = _differences(old.allocated_claims, new.allocated_claims)
    change.claims_gone, change.claims_new = gone, arrived
    if not changed_slices and not gone and not arrived:
        return change
    # Unchanged slices are in both views: the new ones and the old changed ones cover both.
    reach = _reach(new.slices)
    if old_only:
        reach = dict(reach)  # the kept one is shared
        for key, nodes in pool_nodes(old_only).items():
            known = reach.get(key, set())
            reach[key] = None if nodes is None or known is None else known | nodes
    touched: set[PoolKey] = set()
    for obj in changed_slices:
        spec = obj.get("spec") or {}
        touched.add(
            (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        )
        change.slices_changed = True
    for claim in [*gone, *arrived]:
        for result in claim_results(claim):
            touched.add((str(result.get("driver")), str(result.get("pool"))))
    for key in touched:
        nodes = reach.get(key, set())
        if nodes is None:
            change.every_node = True
            break
        change.nodes.update(nodes)
    return change


# The slices `pool_nodes` was last worked out for, and the result. Most changes are claims: the
# slices, and so the pools' reach, are the same as the last change's, and scanning 10,000 slices
# again cost a third of following a change.
_last_reach: tuple[Sequence[JSON], dict[PoolKey, set[str] | None]] = ((), {})


def _reach(slices: Sequence[JSON]) -> dict[PoolKey, set[str] | None]:
    """`pool_nodes(slices)`, computed again only when the slices are other objects. The result
    is shared: never change it."""
    global _last_reach
    kept = _last_reach
    if len(kept[0]) == len(slices) and all(map(operator.is_, kept[0], slices)):
        return kept[1]
    reach = pool_nodes(slices)
    _last_reach = (list(slices), reach)
    return reach
