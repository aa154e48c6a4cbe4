"""One allocator over one cluster view, asked node after node: `Simulation` and per-node verdicts.

`Simulation` builds one `Allocator` for a `ClusterView` and asks it node after node, as the
scheduler's filter does, so parsed slices, built pools and selector results are shared by all
nodes (and, for headroom, by all copies). Placements are recorded on the allocator
incrementally (`Allocator.record_allocation`). Nothing here writes to the database.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.devices.availability import consumed_sets, counter_set_units
from claims.whatif import equivalence
from claims.whatif.equivalence import NodeClasses, allocation_results
from claims.whatif.follow import ViewChange, holder_keys, holders
from claims.whatif.inputs import JSON, InputClaim, WhatIfError, field_of_allocation_error
from claims.whatif.state import ClusterView, selector_cache
from dashboard.cancel import stop_check
from dralib.allocator import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    Allocator,
    Features,
    NodeAllocationError,
    NodeInfo,
)
from dralib.allocator.equivalence import prepare_slices
from dralib.allocator.explain import STAGES, RequestReport, explain
from dralib.allocator.nodeselection import NodeSelector, node_matches
from dralib.allocator.quantity import stored_form

# Questions whose per-node verdicts a followed simulation keeps (most recent first).
MEMO_QUESTIONS = 8
# The DynamicResources filter's reasons (dynamicresources.go, 1.36).
CANNOT_ALLOCATE = "cannot allocate all claims"
CLAIM_NOT_AVAILABLE = "resourceclaim not available on the node"
# The what-if's own words for a node it did not get to (never the scheduler's).
NOT_EVALUATED = "node(s) not evaluated (what-if time budget)"


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
    # Not evaluated: the time budget ran out or the search was cancelled first (see `error`).
    skipped: bool = False

    def copy(self, *, schedulable: bool) -> NodeVerdict:
        """A copy with its own flags (headroom changes `fits` and `results` of the verdicts it
        is given); the results and reports are shared. `dataclasses.replace` cost a fifth of
        answering 5,000 nodes from kept verdicts."""
        return NodeVerdict(
            self.node,
            schedulable,
            self.fits,
            self.results,
            self.reports,
            self.error,
            self.pinned_out,
            self.skipped,
        )

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


def flatten_devices(claim_ref: str, allocation: JSON) -> list[JSON]:
    """The devices of one AllocationResult, one entry per result, with the claim's name.

    Amounts of consumedCapacity are shown as the cluster will show them: the allocator writes
    what the scheduler sends ("5000000000"), the API server stores its canonical form ("5G").
    """
    out = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        # Every field of the result (tolerations, binding conditions, capacity, share ID).
        entry = {"claim": claim_ref, **result}
        consumed = result.get("consumedCapacity")
        if isinstance(consumed, dict):
            entry["consumedCapacity"] = {
                name: stored_form(value) if isinstance(value, str) else value
                for name, value in consumed.items()
            }
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
        # Devices only other claims keep from it: the diagnosis names their holders.
        "taken": [
            {"device": f"{driver}/{pool}/{device}", "stage": stage}
            for driver, pool, device, stage in report.taken
        ],
    }


class Simulation:
    """One allocator over one cluster view, asked for any number of claim sets."""

    def __init__(
        self, view: ClusterView, *, features: Features, classes: bool | None = None
    ) -> None:
        self.view = view
        self.features = features
        # Ask the allocator once per class of identical nodes (claims.whatif.equivalence).
        self.use_classes = equivalence.ENABLED if classes is None else classes
        self.classes: NodeClasses | None = None
        # How many times the allocator was asked to allocate or list free devices.
        self.asked = 0
        self._infos: dict[int, tuple[JSON, NodeInfo]] = {}
        self.class_names = {str((c.get("metadata") or {}).get("name")) for c in view.classes}
        state = AllocatedState()
        try:
            state.add_allocated_claims(
                view.allocated_claims, consumable_capacity=features.ConsumableCapacity
            )
            self.allocator = self._new_allocator(view, state)
            self._new_classes()
        except AllocationError as exc:
            # The stored cluster itself is malformed (a slice the allocator cannot read).
            raise WhatIfError("cluster", str(exc)) from exc
        self._base_state = state
        # Per question, per node: the first verdict, valid until a change touches the node
        # (see `follow`). Only simulations that follow the cluster keep them.
        self.memo: OrderedDict[str, dict[str, NodeVerdict]] | None = None
        # remembered_checks: per pod question, node name -> (node, filter result), valid for
        # the usage (pods) they were made with.
        self._checks: OrderedDict[str, dict[str, tuple[JSON, tuple[str, str], bool]]] = (
            OrderedDict()
        )
        self._checks_usage: object = None
        self._holders: Counter[tuple[str, str, str, str | None]] | None = None
        # Seconds the search ran before the time budget ended it (None: within budget).
        self.gave_up: float | None = None
        # True when the search stopped because nobody waits for it (client gone, shutdown).
        self.cancelled = False
        self._budget = 0.0
        # True once placements were recorded on the allocator's copy of the state.
        self._dirty = True
        # A simulation is reused by later requests on the same view; one user at a time.
        self.lock = threading.Lock()
        self.reset()

    def _new_allocator(self, view: ClusterView, state: AllocatedState) -> Allocator:
        return Allocator(
            classes=view.classes,
            slices=view.slices,
            features=self.features,
            allocated_state=state,
            selector_cache=selector_cache(
                consumable_capacity=self.features.ConsumableCapacity,
                list_type_attributes=self.features.ListTypeAttributes,
            ),
            slice_cache=view.slice_cache,
        )

    def _new_classes(self) -> None:
        self.classes = (
            NodeClasses(self.allocator, share_id=lambda: str(uuid.uuid4()))
            if self.use_classes
            else None
        )

    def prepare_nodes(self) -> int:
        """Gather every node's pools, which no question changes: a start-up does it once so the
        first question does not. Returns how many nodes were prepared.

        What each device offers a search (checked fields, CEL domains, content key) is left to
        the first search that reaches it: reading it for all 102,000 devices of the 5,000-node
        demo cost 390 MB of resident memory to save a tenth of the first question.
        """
        prepared = 0
        if self.classes is not None:
            prepare_slices(self.allocator.slices)
        for node in self.view.nodes:
            try:
                self.allocator.new_run(NodeInfo.from_object(node), ())
            except AllocationError:
                continue  # the question reports it for this node
            prepared += 1
        return prepared

    def keep_verdicts(self) -> None:
        """Remember first verdicts per question and node from now on (see `follow`)."""
        if self.memo is None:
            self.memo = OrderedDict()
            self._holders = holders(
                self.view.allocated_claims, consumable_capacity=self.features.ConsumableCapacity
            )

    def remembered_checks(
        self, question: str
    ) -> dict[str, tuple[JSON, tuple[str, str], bool]] | None:
        """Per node name, (node object, result, capacity unknown) of the other scheduler
        filters for one pod (`question`: what they read of the pod), kept while the pods on
        the nodes are those of this view: a result is only taken for the very node object it
        was made for. None when this simulation keeps no verdicts."""
        if self.memo is None:
            return None
        if self._checks_usage is not self.view.usage:
            # Pods changed (the usage is read anew with them): every node's room may differ.
            self._checks.clear()
            self._checks_usage = self.view.usage
        checks = self._checks.get(question)
        if checks is None:
            checks = self._checks[question] = {}
            while len(self._checks) > MEMO_QUESTIONS:
                self._checks.popitem(last=False)
        self._checks.move_to_end(question)
        return checks

    def remembered(self, question: str) -> dict[str, NodeVerdict] | None:
        """The kept verdicts of one question (None when this simulation keeps none)."""
        if self.memo is None:
            return None
        verdicts = self.memo.get(question)
        if verdicts is None:
            verdicts = self.memo[question] = {}
            while len(self.memo) > MEMO_QUESTIONS:
                self.memo.popitem(last=False)
        self.memo.move_to_end(question)
        return verdicts

    def follow(self, view: ClusterView, change: ViewChange) -> None:
        """Move to a newer view of the same cluster, changing only what the change touches.

        The allocated state is updated claim by claim (released and recorded) unless a changed
        claim shares a device with another claim, where only a recount is exact; the allocator
        is built again (parsed slices and selector results are shared caches) only when slices
        or nodes changed; kept verdicts of the touched nodes are forgotten. The caller checked
        that `change.rebuild` is False. Must hold `lock`.
        """
        consumable = self.features.ConsumableCapacity
        counts = self._holders
        if counts is None:
            counts = holders(view.allocated_claims, consumable_capacity=consumable)
        exact = True
        for claim in change.claims_gone:
            for key in holder_keys(claim, consumable_capacity=consumable):
                exact = exact and counts[key] == 1
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]
        for claim in change.claims_new:
            for key in holder_keys(claim, consumable_capacity=consumable):
                counts[key] += 1
                exact = exact and counts[key] == 1
        self._holders = counts
        try:
            state = self._base_state
            if not exact:
                state = AllocatedState()
                state.add_allocated_claims(view.allocated_claims, consumable_capacity=consumable)
            else:
                for claim in change.claims_gone:
                    state.remove_results(
                        holder_results(claim), consumable_capacity=consumable, where="cluster"
                    )
                for claim in change.claims_new:
                    state.add_results(
                        holder_results(claim), consumable_capacity=consumable, where="cluster"
                    )
            if change.slices_changed or change.nodes_changed:
                self.allocator = self._new_allocator(view, state.copy())
                self._new_classes()
            else:
                self.allocator.allocated_state = state.copy()
                if self.classes is not None:
                    self.classes.restore()
                    if exact and not change.every_node:
                        self.classes.followed(
                            allocation_results([*change.claims_gone, *change.claims_new]),
                            change.nodes,
                        )
                    else:
                        self._new_classes()
        except AllocationError as exc:
            raise WhatIfError("cluster", str(exc)) from exc
        self._base_state = state
        self._dirty = False
        self.view = view
        if self.memo is not None:
            if change.every_node:
                self.memo.clear()
            else:
                for verdicts in self.memo.values():
                    for node in change.nodes:
                        verdicts.pop(node, None)

    def start_budget(self, seconds: float | None) -> None:
        """Let the searches of one question run for at most `seconds` of CPU time of the calling
        thread in total (None: no limit).

        Past the budget every node not yet asked is answered "not evaluated" at once, so a
        hostile or huge question ends within the budget with a partial answer. The same happens,
        budget or not, once the caller's client went away or the process shuts down
        (`dashboard.cancel`; call this in the thread serving the request).
        """
        self.gave_up = None
        self.cancelled = False
        self._budget = seconds or 0.0
        # CPU time of this thread, not wall time: on a loaded machine (other requests, other
        # processes) a wall-clock budget ran out before the search had its share, and the same
        # question got a partial answer under load and a complete one when quiet.
        self.allocator.clock = time.thread_time
        self.allocator.deadline = time.thread_time() + seconds if seconds else None
        self.allocator.cancelled = stop_check()

    def end_budget(self) -> None:
        self.allocator.deadline = None
        self.allocator.cancelled = None

    def reset(self) -> None:
        """Forget placements recorded since construction: back to the cluster's allocations."""
        if self._dirty:
            # Assigning a state makes the allocator forget counters derived from the old one.
            self.allocator.allocated_state = self._base_state.copy()
            self._dirty = False
            if self.classes is not None:
                self.classes.restore()

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
        if len(claims) != len(results):
            raise ValueError(f"{len(results)} allocation results for {len(claims)} claims")
        self._dirty = True
        self.allocator.record_allocation(results)
        if self.classes is not None:
            self.classes.placed(results)

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
        info = self._node_info(node)
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
        if self.gave_up is not None:
            verdict.error = self.budget_message()
            verdict.skipped = True
            return verdict
        slot = None
        if self.classes is not None:
            slot, known = self.classes.answer(info, claims, with_reasons=with_reasons)
            if known is not None:
                verdict.fits, verdict.results, verdict.reports = known
                return verdict
        self.asked += 1
        try:
            results = self.allocator.allocate(info, claims)
        except AllocationTimeout as exc:
            self.gave_up = exc.elapsed
            self.cancelled = exc.cancelled
            verdict.error = self.budget_message()
            verdict.skipped = True
            return verdict
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
            verdict.reports = explain(self.allocator, node=info, claims=claims)
        if slot is not None and self.classes is not None:
            self.classes.keep(
                slot, fits=verdict.fits, results=verdict.results, reports=verdict.reports
            )
        return verdict

    def _node_info(self, node: JSON) -> NodeInfo:
        # Headroom asks a node once per copy: its labels are read once. Node objects are
        # immutable, as informer objects are; the one kept is compared by identity.
        kept = self._infos.get(id(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        info = NodeInfo.from_object(node)
        if len(self._infos) > 2 * len(self.view.nodes) + 100:
            self._infos.clear()
        self._infos[id(node)] = (node, info)
        return info

    def filter_status(
        self, node: JSON, verdict: NodeVerdict, claims: Sequence[JSON]
    ) -> tuple[str, bool]:
        """(reason, is_error) of the scheduler's DynamicResources filter for a node that passed
        the other filters and did not fit (pkg/scheduler/framework/plugins/dynamicresources).

        Its Filter allocates the claims still to allocate first: failing that is "cannot
        allocate all claims"; an allocation error aborts the scheduling attempt (is_error). Only
        then does an allocated claim whose node selector excludes the node make it "resourceclaim
        not available on the node"; so for a node the pod's allocated claims rule out, the
        claims are allocated here, once the answer needs the words. A node the what-if did not
        evaluate (time budget) is NOT_EVALUATED.
        """
        if verdict.skipped:
            return NOT_EVALUATED, False
        if verdict.error:
            return verdict.error, True
        if not verdict.pinned_out:
            return CANNOT_ALLOCATE, False
        if not claims:
            return CLAIM_NOT_AVAILABLE, False
        if self.gave_up is not None:
            return NOT_EVALUATED, False
        try:
            results = self.allocator.allocate(NodeInfo.from_object(node), claims)
        except AllocationTimeout as exc:
            self.gave_up = exc.elapsed
            self.cancelled = exc.cancelled
            return NOT_EVALUATED, False
        except AllocationError as exc:
            return str(exc), True
        return (CLAIM_NOT_AVAILABLE if results is not None else CANNOT_ALLOCATE), False

    def budget_message(self) -> str:
        if self.cancelled:
            return "not evaluated: the search was cancelled"
        return f"not evaluated: gave up after the CPU time budget of {self._budget:g} s"

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
        return self.free_units(node, claims, expressions)[0]

    def free_units(
        self, node: JSON, claims: Sequence[JSON], expressions: Sequence[tuple[str, ...]]
    ) -> tuple[list[str], list[str]]:
        """`free_devices`, and the free physical units among them (`claims.devices.availability`:
        a device, or the counter set partitions share) as driver/pool/unit: nothing on them
        allocated, and a device on them that one of the claims' classes would accept."""
        info = self._node_info(node)
        slot = None
        if self.classes is not None:
            slot, known = self.classes.free(info, claims, expressions)
            if known is not None:
                return _names(known[0]), _names(known[1])
        self.asked += 1
        run = self.allocator.new_run(info, claims)
        cache = self.allocator.selector_cache
        is_allocated = self.allocator.allocated_state.is_device_allocated
        free: list[tuple[str, str, str]] = []
        free_units: list[tuple[str, str, str]] = []
        for pool in run.pools:
            if pool.is_incomplete or pool.is_invalid:
                continue
            devices = [(info, device) for info in pool.slices for device in info.devices]
            sets = [consumed_sets(device.consumes_counters_raw) for _, device in devices]
            names = counter_set_units(sets)
            # unit -> (anything on it allocated, a free device of the classes on it)
            units: dict[tuple[bool, str], list[bool]] = {}
            for (info, device), consumed in zip(devices, sets, strict=True):
                unit = units.setdefault(
                    (True, names[consumed[0]]) if consumed else (False, device.name),
                    [False, False],
                )
                if is_allocated((info.driver, info.pool, device.name)):
                    unit[0] = True
                elif any(_all_match(cache, exprs, device) for exprs in expressions):
                    free.append((info.driver, info.pool, device.name))
                    unit[1] = True
            free_units.extend(
                (pool.driver, pool.name, name)
                for (_, name), (taken, wanted) in units.items()
                if wanted and not taken
            )
        if slot is not None and self.classes is not None:
            self.classes.keep_free(slot, free, free_units)
        return _names(free), _names(free_units)


def _names(ids: Sequence[tuple[str, str, str]]) -> list[str]:
    return [f"{driver}/{pool}/{name}" for driver, pool, name in ids]


def holder_results(claim: JSON) -> list[JSON]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _all_match(cache: Any, expressions: tuple[str, ...], device: Any) -> bool:
    try:
        # select() as the search calls it: its results are kept per device.
        return cache.select(expressions, (), device) is True
    except Exception:  # a class selector failing on a device just means "not this class"
        return False
