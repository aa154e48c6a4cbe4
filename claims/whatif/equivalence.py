"""Equivalence classes of identical nodes: the allocator is asked once per class, not per node.

Most nodes of a fleet carry the same devices in pools named after themselves and hold the same
allocations, so the allocator's answer for one is the answer for the others with pool names
and the node's own name swapped (`dralib.allocator.equivalence`). `NodeClasses` keeps, per
question, the first answer of each class of nodes and hands out translations of it; an answer it
cannot translate exactly (an error, a report naming pools) is not kept, so such nodes are asked
one by one.

A node's key includes the allocated state of its own pools; what every node sees alike (shared
pools) is tracked by `version`, which a placement on a shared pool moves on. So headroom's copies
on a node replay the copies of the first node of its class: after each recorded copy the node's
key is read again and meets the key the first node had after its own copy.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from claims.whatif.inputs import JSON
from dralib.allocator import Allocator, NodeInfo, RequestReport
from dralib.allocator.equivalence import (
    NodeKey,
    NodeKeys,
    Relevant,
    Selections,
    pool_names,
    relevant_attributes,
    reports_translate,
    selections,
    translate_reports,
    translate_results,
)

# Off: every node is asked on its own (the answers must be the same; tests compare them).
ENABLED = True
# Questions whose first answers per class are kept (a what-if asks two: first and later copies).
KEPT_QUESTIONS = 4
# Attribute sets whose node keys are kept.
KEPT_VIEWS = 4
# Keys (a class in one allocated state) numbered at most: headroom makes several per class.
KEPT_CLASSES = 100_000

DeviceIDs = list[tuple[str, str, str]]
Question = tuple[Any, ...]
# (question, version, node key, class id, node): where `keep` files the first node's answer.
Slot = tuple[Question, int, NodeKey, int, str]


class NodeClasses:
    """Node keys and first answers per class for one allocator (see the module docstring)."""

    def __init__(self, allocator: Allocator, *, share_id: Callable[[], str]) -> None:
        self.keys = NodeKeys(allocator)
        self.share_id = share_id
        self._classes = allocator.classes
        self._node_keys: OrderedDict[
            tuple[Relevant, Selections | None], dict[str, tuple[NodeKey, int] | None]
        ] = OrderedDict()
        # Keys are deep tuples whose hash Python does not keep: each is hashed once, here.
        self._class_ids: dict[tuple[Any, ...], int] = {}
        self._numbers = itertools.count()
        # question -> (claims held so their ids stay theirs, relevant attributes, selections,
        # firsts)
        self._questions: OrderedDict[
            Question, tuple[list[Any], Relevant, Selections | None, dict[tuple[int, Any], Any]]
        ] = OrderedDict()
        self.version = 0
        # Nodes whose own pools got placements since the cluster's state (see `restore`).
        self._touched: set[str] = set()
        self._shared_touched = False

    def _question(
        self, question: Question, claims: Sequence[JSON], *, own: bool
    ) -> tuple[Relevant, Selections | None, dict[tuple[int, Any], Any]]:
        found = self._questions.get(question)
        if found is None:
            found = (
                list(claims),
                relevant_attributes(self._classes, claims),
                selections(self._classes, claims, own=own),
                {},
            )
            self._questions[question] = found
            while len(self._questions) > KEPT_QUESTIONS:
                self._questions.popitem(last=False)
        self._questions.move_to_end(question)
        return found[1], found[2], found[3]

    def node_key(
        self, node: NodeInfo, relevant: Relevant, wanted: Selections | None
    ) -> tuple[NodeKey, int] | None:
        """The node's key and the id of its class."""
        keys = self._node_keys.get((relevant, wanted))
        if keys is None:
            keys = self._node_keys[(relevant, wanted)] = {}
            while len(self._node_keys) > KEPT_VIEWS:
                self._node_keys.popitem(last=False)
        if node.name in keys:
            return keys[node.name]
        key = self.keys.key(node, relevant, wanted)
        if key is None:
            keys[node.name] = None
            return None
        class_id = self._class_ids.get(key.key)
        if class_id is None:
            if len(self._class_ids) >= KEPT_CLASSES:
                # Ids are never given twice (`_numbers`): a clear costs hits, never a wrong one.
                self._class_ids.clear()
            class_id = self._class_ids[key.key] = next(self._numbers)
        found = keys[node.name] = (key, class_id)
        return found

    def _slot(self, kind: Any, node: NodeInfo, claims: Sequence[JSON]) -> tuple[Slot | None, Any]:
        question = (kind, *map(id, claims))
        relevant, wanted, firsts = self._question(question, claims, own=kind[0] == "verdict")
        found = self.node_key(node, relevant, wanted)
        if found is None:
            return None, None
        key, class_id = found
        return (question, self.version, key, class_id, node.name), firsts.get(
            (self.version, class_id)
        )

    def answer(
        self, node: NodeInfo, claims: Sequence[JSON], *, with_reasons: bool
    ) -> tuple[Slot | None, tuple[bool, list[JSON] | None, list[RequestReport]] | None]:
        """(slot, (fits, results, reports) of the node translated from its class, or None)."""
        slot, first = self._slot(("verdict", with_reasons), node, claims)
        if slot is None or first is None:
            return slot, None
        first_node, first_key, fits, results, reports = first
        names = pool_names(first_key, slot[2])
        if fits:
            translated = translate_results(
                results, names=names, first_node=first_node, node=node.name, share_id=self.share_id
            )
            return slot, (True, translated, [])
        return slot, (False, None, translate_reports(reports, names=names))

    def keep(
        self,
        slot: Slot,
        *,
        fits: bool,
        results: list[JSON] | None,
        reports: list[RequestReport],
    ) -> None:
        """File a node's own answer as its class's first, when it translates exactly."""
        if not fits and not reports_translate(reports, slot[2].local):
            return
        self._keep(slot, (slot[4], slot[2], fits, results, reports))

    def _keep(self, slot: Slot, value: Any) -> None:
        question, version, _, class_id, _ = slot
        if version != self.version:
            return
        found = self._questions.get(question)
        if found is not None:
            found[3].setdefault((version, class_id), value)

    def free(
        self, node: NodeInfo, claims: Sequence[JSON], expressions: Sequence[tuple[str, ...]]
    ) -> tuple[Slot | None, tuple[DeviceIDs, DeviceIDs] | None]:
        """(slot, free devices and units of the node translated from its class, or None)."""
        slot, first = self._slot(("free", tuple(expressions)), node, claims)
        if slot is None or first is None:
            return slot, None
        first_key, devices, units = first
        names = pool_names(first_key, slot[2])
        return slot, (
            [(d, names.get((d, p), p), n) for d, p, n in devices],
            [(d, names.get((d, p), p), n) for d, p, n in units],
        )

    def keep_free(self, slot: Slot, devices: DeviceIDs, units: DeviceIDs) -> None:
        self._keep(slot, (slot[2], devices, units))

    def placed(self, results: Iterable[JSON]) -> None:
        """Placements were recorded: their nodes' keys change, or, on a shared pool, all do."""
        self._changed(results, touched=True)

    def restore(self) -> None:
        """The allocated state went back to the cluster's (Simulation.reset)."""
        self.keys.restore()
        self.forget(self._touched)
        self._touched = set()
        if self._shared_touched:
            self._shared_touched = False
            self._new_version()

    def followed(self, results: Iterable[JSON], nodes: Iterable[str]) -> None:
        """The cluster's allocations changed by these results, and these nodes changed."""
        self._changed(results, touched=False)
        self.keys.commit()
        self.forget(nodes)

    def _changed(self, results: Iterable[JSON], *, touched: bool) -> None:
        devices = []
        shared = False
        owner = self.keys.owner
        for allocation in results:
            for entry in (allocation.get("devices") or {}).get("results") or []:
                if entry.get("adminAccess") is True:
                    continue  # holds no device (AllocatedState.add_results)
                device_id = (
                    str(entry.get("driver")),
                    str(entry.get("pool")),
                    str(entry.get("device")),
                )
                if owner(device_id[:2]) is None:
                    shared = True
                devices.append(device_id)
        nodes: set[str | None] = {owner(pool) for pool in self.keys.changed(devices)}
        nodes.discard(None)
        self.forget(nodes)
        if touched:
            self._touched.update(nodes)
            self._shared_touched = self._shared_touched or shared
        if shared:
            self._new_version()

    def _new_version(self) -> None:
        self.version += 1
        for _, _, _, firsts in self._questions.values():
            firsts.clear()

    def forget(self, nodes: Iterable[str]) -> None:
        nodes = list(nodes)
        if not nodes:
            return
        for keys in self._node_keys.values():
            for node in nodes:
                keys.pop(node, None)


def allocation_results(claims: Iterable[JSON]) -> list[JSON]:
    """The allocations of claims, as `NodeClasses.followed` reads them."""
    return [(c.get("status") or {}).get("allocation") or {} for c in claims]
