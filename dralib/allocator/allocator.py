"""The allocator: given classes, slices and what is already allocated, allocate claims per node.

`Allocator` is built once (slices parsed, pools and selector results cached) and then asked per
node, as the scheduler's filter asks upstream's allocator. `allocate_scenario` runs a scenario in
the shared conformance format and returns the contract output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dralib.allocator.budget import SearchWatch
from dralib.allocator.counters import CounterSets
from dralib.allocator.limits import check_device_class
from dralib.allocator.nodeselection import NodeInfo
from dralib.allocator.pools import Pool, PoolBuilder, SliceCache
from dralib.allocator.requests import ClaimInfo, RequestView
from dralib.allocator.search import DONE, DeviceResult, RequestData, Run
from dralib.allocator.selection import SelectorCache
from dralib.allocator.slices import SliceInfo
from dralib.allocator.types import (
    JSON,
    AllocatedState,
    AllocationError,
    DeviceID,
    Features,
    NodeAllocationError,
    ScenarioError,
)


class Allocator:
    """Allocates claims on one node at a time; reuse one instance for many nodes.

    Built once from classes, slices, allocated state and features; `allocate(node, claims)` then
    answers per node. Work that does not depend on the node (parsing, selector results per device
    content, request checks, pools of the same slices) is done once and reused. Objects passed in
    are treated as immutable. An instance is not thread-safe: use one per thread.

    `deadline` (a value of `clock`: `time.monotonic` when None, or `time.thread_time` for a
    budget in the calling thread's CPU time) and `cancelled` (a callable) bound the search of
    every later `allocate` call; all are plain attributes, so a caller can set a fresh budget
    per question. Past the deadline, or once `cancelled()` returns True, `allocate` raises
    AllocationTimeout.
    """

    def __init__(
        self,
        *,
        classes: Sequence[JSON],
        slices: Sequence[JSON],
        features: Features | None = None,
        allocated_state: AllocatedState | None = None,
        selector_cache: SelectorCache | None = None,
        slice_cache: SliceCache | None = None,
        share_id_factory: Callable[[], str] | None = None,
        deadline: float | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.features = features or Features()
        self.deadline = deadline
        self.clock: Callable[[], float] | None = None
        self.cancelled = cancelled
        self._allocated_state = allocated_state or AllocatedState()
        self.share_id_factory = share_id_factory
        self.classes: dict[str, JSON] = {}
        for index, device_class in enumerate(classes):
            if not isinstance(device_class, dict):
                raise ScenarioError(f"classes[{index}]: expected a DeviceClass object")
            name = (device_class.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise ScenarioError(f"classes[{index}]: metadata.name is required")
            check_device_class(device_class.get("spec"), where=f"DeviceClass {name}")
            # Upstream's lister returns the first class with the name.
            self.classes.setdefault(name, device_class)
        parse = slice_cache.parse if slice_cache is not None else SliceInfo.parse
        self.slices = [parse(raw, index=i) for i, raw in enumerate(slices)]
        self._slices_on_node: dict[str, list[SliceInfo]] = {}
        self._slices_shared: list[SliceInfo] = []
        for info in self.slices:
            if info.node_name:
                self._slices_on_node.setdefault(info.node_name, []).append(info)
            else:
                self._slices_shared.append(info)
        options = (self.features.ConsumableCapacity, self.features.ListTypeAttributes, False)
        if selector_cache is None or selector_cache.key != options:
            selector_cache = SelectorCache(
                consumable_capacity=options[0], list_type_attributes=options[1]
            )
        self.selector_cache = selector_cache
        self._pool_builder = PoolBuilder(
            features=self.features,
            all_slices=self.slices,
            built=slice_cache.pools if slice_cache is not None else None,
        )
        # Available counters per pool name, computed on first use like upstream's cache.
        self._counter_cache: dict[str, CounterSets] = {}
        self.num_allocate_one = 0
        self._pools_by_node: dict[tuple[str, tuple[tuple[str, str], ...]], list[Pool]] = {}
        self._request_cache: dict[tuple[int, str | None], tuple[RequestView, RequestData]] = {}
        self._last_claims: tuple[list[JSON | ClaimInfo], list[ClaimInfo]] = ([], [])

    @property
    def allocated_state(self) -> AllocatedState:
        """What is already allocated; the searches of later `allocate` calls exclude it."""
        return self._allocated_state

    @allocated_state.setter
    def allocated_state(self, state: AllocatedState) -> None:
        # Available counters were derived from the old state.
        self._allocated_state = state
        self._counter_cache.clear()

    def record_allocation(self, results: Sequence[JSON]) -> list[DeviceID]:
        """Count AllocationResults (as `allocate` returns them) as allocated from now on.

        Updates the allocated state in place and forgets the available counters of only the pools
        whose devices became allocated, so that placing claims one after another (headroom)
        costs one allocation each, not a rebuild. Returns the devices newly allocated.
        """
        consumable = self.features.ConsumableCapacity
        added: list[DeviceID] = []
        for index, allocation in enumerate(results):
            if not isinstance(allocation, dict):
                raise ScenarioError(f"results[{index}]: expected an AllocationResult object")
            entries = (allocation.get("devices") or {}).get("results") or []
            added.extend(
                self._allocated_state.add_results(
                    entries,
                    consumable_capacity=consumable,
                    where=f"results[{index}].devices.results",
                )
            )
        for _, pool, _ in added:
            # Only a device that was not allocated before changes its pool's available counters
            # (a further share of a device does not); the cache is keyed by pool name, as
            # upstream's is.
            self._counter_cache.pop(pool, None)
        return added

    def release_allocation(self, results: Sequence[JSON]) -> list[DeviceID]:
        """Stop counting AllocationResults recorded earlier (the inverse of `record_allocation`).

        For a claim that was deallocated or deleted: updates the allocated state in place and
        forgets the available counters of only the pools whose devices became free, so that a
        long-lived allocator follows a changing cluster without a rebuild. Returns the devices
        that are no longer allocated.
        """
        consumable = self.features.ConsumableCapacity
        freed: list[DeviceID] = []
        for index, allocation in enumerate(results):
            if not isinstance(allocation, dict):
                raise ScenarioError(f"results[{index}]: expected an AllocationResult object")
            entries = (allocation.get("devices") or {}).get("results") or []
            freed.extend(
                self._allocated_state.remove_results(
                    entries,
                    consumable_capacity=consumable,
                    where=f"results[{index}].devices.results",
                )
            )
        for _, pool, _ in freed:
            self._counter_cache.pop(pool, None)
        return freed

    def new_run(self, node: JSON | NodeInfo | None, claims: Sequence[JSON | ClaimInfo]) -> Run:
        """Gather the node's pools and prepare a search without running it."""
        node_info = node if isinstance(node, NodeInfo) else NodeInfo.from_object(node)
        claim_infos = self._parse_claims(claims)
        return Run(
            features=self.features,
            node=node_info,
            pools=self.pools_for(node_info),
            claims=claim_infos,
            classes=self.classes,
            allocated_state=self.allocated_state,
            selectors=self.selector_cache,
            counter_cache=self._counter_cache,
            share_id_factory=self.share_id_factory,
            request_cache=self._request_cache,
            watch=(
                SearchWatch(
                    deadline=self.deadline,
                    cancelled=self.cancelled,
                    claims_total=len(claim_infos),
                    clock=self.clock,
                )
                if self.deadline is not None or self.cancelled is not None
                else None
            ),
        )

    def pools_for(self, node_info: NodeInfo) -> list[Pool]:
        """The pools the node can use, in the order the search visits them (GatherPools)."""
        # Pools depend only on the node's name and labels; nodes asked again reuse them.
        node_key = (node_info.name, tuple(node_info.labels.items()))
        pools = self._pools_by_node.get(node_key)
        if pools is None:
            on_node = self._slices_on_node.get(node_info.name, [])
            slices_for_node = on_node + self._slices_shared if on_node else self._slices_shared
            pools = self._pool_builder.gather(slices_for_node, node_info)
            self._pools_by_node[node_key] = pools
        return pools

    def _parse_claims(self, claims: Sequence[JSON | ClaimInfo]) -> list[ClaimInfo]:
        # Objects are treated as immutable, like informer objects: the same claim objects asked
        # for node after node are parsed once.
        last_raw, last_parsed = self._last_claims
        if len(last_raw) == len(claims) and all(
            a is b for a, b in zip(last_raw, claims, strict=True)
        ):
            return last_parsed
        parsed = [
            c if isinstance(c, ClaimInfo) else ClaimInfo.parse(c, index=i)
            for i, c in enumerate(claims)
        ]
        self._last_claims = (list(claims), parsed)
        return parsed

    def allocate(
        self, node: JSON | NodeInfo | None, claims: Sequence[JSON | ClaimInfo]
    ) -> list[JSON] | None:
        """One AllocationResult per claim, or None if the claims do not fit on the node.

        Raises AllocationError for problems with the input (invalid CEL, unknown class, a limit
        exceeded), NodeAllocationError when only this node is affected (invalid pools) and
        AllocationTimeout when the deadline passed or the caller cancelled.
        """
        run = self.new_run(node, claims)
        run.prepare()
        try:
            outcome = run.search()
        finally:
            self.num_allocate_one += run.num_allocate_one
        if outcome != DONE:
            invalid = [pool for pool in run.pools if pool.is_invalid]
            if invalid:
                # Upstream's words first (callers match them), then which pools and why.
                named = "; ".join(
                    f"{pool.driver}/{pool.name}: {pool.invalid_reason}" for pool in invalid
                )
                raise NodeAllocationError(f"invalid resource pools were encountered ({named})")
            return None
        return [build_result(run, claim_index) for claim_index in range(len(run.claims))]


def build_result(run: Run, claim_index: int) -> JSON:
    """The AllocationResult of one claim in Kubernetes JSON shape."""
    claim = run.claims[claim_index]
    binding = run.features.DeviceBindingAndStatus
    results = []
    for item in run.results[claim_index]:
        entry: JSON = {
            "request": item.request_name,
            "driver": item.id[0],
            "pool": item.id[1],
            "device": item.id[2],
        }
        if item.admin_access is not None:
            entry["adminAccess"] = item.admin_access
        if item.request.tolerations:
            entry["tolerations"] = item.request.tolerations
        if binding and item.device.binding_conditions:
            entry["bindingConditions"] = item.device.binding_conditions
        if binding and item.device.binding_failure_conditions:
            entry["bindingFailureConditions"] = item.device.binding_failure_conditions
        if item.share_id is not None:
            entry["shareID"] = item.share_id
        if item.consumed_capacity:
            entry["consumedCapacity"] = {k: str(v) for k, v in item.consumed_capacity.items()}
        results.append(entry)
    devices: JSON = {"results": results}
    config = _build_config(run, claim_index)
    if config:
        devices["config"] = config
    allocation: JSON = {"devices": devices}
    try:
        node_selector = _node_selector(run.results[claim_index], run.node.name)
    except AllocationError as exc:
        raise AllocationError(f"create NodeSelector for claim {claim.name}: {exc}") from exc
    if node_selector is not None:
        allocation["nodeSelector"] = node_selector
    return allocation


def _device_configuration(entry: Mapping[str, Any]) -> JSON:
    # DeviceConfiguration is inlined next to `requests` (claim) or alone (class).
    return {k: v for k, v in entry.items() if k != "requests"}


def _selected_names(run: Run, claim_index: int) -> list[tuple[str, str | None]]:
    """Per request: its name and, for a request with subrequests, request/selected-subrequest."""
    names: list[tuple[str, str | None]] = []
    for request_index, request in enumerate(run.claims[claim_index].requests):
        data = run.request_data[(claim_index, request_index, 0)]
        if data.parent is not None:
            sub = request.subrequests[run.selected_sub.get((claim_index, request_index), 0)]
            names.append((request.name, f"{request.name}/{sub.name}"))
        else:
            names.append((request.name, None))
    return names


def _build_config(run: Run, claim_index: int) -> list[JSON]:
    claim = run.claims[claim_index]
    config: list[JSON] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for request_index in range(len(claim.requests)):
        data = run.request_data[(claim_index, request_index, 0)]
        if data.parent is not None:
            selected = run.selected_sub.get((claim_index, request_index), 0)
            data = run.request_data[(claim_index, request_index, selected)]
        device_class = data.device_class
        if device_class is None:
            continue
        class_config = (device_class.get("spec") or {}).get("config")
        if not class_config:
            # Nothing to add now or to extend later.
            continue
        class_name = data.class_name
        existing = class_ranges.get(class_name)
        if existing is not None:
            for index in range(*existing):
                config[index]["requests"].append(data.request_name)
            continue
        start = len(config)
        for entry in class_config:
            config.append(
                {
                    "source": "FromClass",
                    "requests": [data.request_name],
                    **_device_configuration(entry),
                }
            )
        class_ranges[class_name] = (start, len(config))
    if not config and not claim.config:
        return config

    names = _selected_names(run, claim_index)
    for entry in claim.config:
        requests = entry.get("requests") or []
        if not requests:
            config.append({"source": "FromClaim", **_device_configuration(entry)})
            continue
        for name, sub_name in names:
            if name in requests or (sub_name is not None and sub_name in requests):
                config.append(
                    {
                        "source": "FromClaim",
                        "requests": list(requests),
                        **_device_configuration(entry),
                    }
                )
                break

    for entry in config:
        requests = entry.get("requests")
        if not requests:
            continue
        if all(
            name in requests or (sub_name is not None and sub_name in requests)
            for name, sub_name in names
        ):
            del entry["requests"]
    return config


def _node_selector(results: list[DeviceResult], node_name: str) -> JSON | None:
    match_fields: list[JSON] = []
    match_expressions: list[JSON] = []
    for item in results:
        info = item.slice
        if info.per_device_node_selection:
            node_name_set = item.device.node_name
            selector = item.device.node_selector_raw
        else:
            node_name_set = info.node_name
            selector = info.node_selector_raw
        if node_name_set is not None or item.device.binds_to_node:
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        if selector is None:
            continue
        terms = selector.get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        if len(terms) == 1:
            _add_requirements(terms[0].get("matchFields") or [], match_fields)
            _add_requirements(terms[0].get("matchExpressions") or [], match_expressions)
    if not match_fields and not match_expressions:
        return None
    term: JSON = {}
    if match_expressions:
        term["matchExpressions"] = match_expressions
    if match_fields:
        term["matchFields"] = match_fields
    return {"nodeSelectorTerms": [term]}


def _add_requirements(new: list[JSON], target: list[JSON]) -> None:
    for requirement in new:
        values = set(requirement.get("values") or [])
        if not any(
            existing.get("key") == requirement.get("key")
            and existing.get("operator") == requirement.get("operator")
            and set(existing.get("values") or []) == values
            for existing in target
        ):
            target.append(requirement)


def scenario_output(
    allocator_or_error: Allocator | AllocationError, node: JSON | None, claims: Sequence[JSON]
) -> JSON:
    """{"results": ..., "error": ...} for one node."""
    if isinstance(allocator_or_error, AllocationError):
        return {"results": None, "error": str(allocator_or_error)}
    try:
        results = allocator_or_error.allocate(node, claims)
    except AllocationError as exc:
        return {"results": None, "error": str(exc)}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        # Objects of the wrong JSON type deep inside a spec; report instead of crashing.
        return {"results": None, "error": f"scenario: malformed object: {exc!r}"}
    return {"results": results, "error": ""}


def allocate_scenario(
    scenario: Mapping[str, Any],
    *,
    share_id_factory: Callable[[], str] | None = None,
    selector_cache: SelectorCache | None = None,
    slice_cache: SliceCache | None = None,
    deadline: float | None = None,
) -> JSON:
    """Run a conformance-format scenario and return the contract output.

    With `nodes`, the same claims are allocated for each node in turn with one allocator and the
    output is {"nodes": [{"node": NAME, "results": ..., "error": ...}, ...]}. A `deadline`
    (`time.monotonic()` value) bounds the whole scenario: nodes whose search runs past it report
    the AllocationTimeout message as their error.
    """
    allocator_or_error: Allocator | AllocationError
    claims: list[JSON] = []
    try:
        if not isinstance(scenario, Mapping):
            raise ScenarioError("scenario: expected an object")
        claims = list(scenario.get("claims") or [])
        allocator_or_error = allocator_from_scenario(
            scenario,
            share_id_factory=share_id_factory,
            selector_cache=selector_cache,
            slice_cache=slice_cache,
        )
        allocator_or_error.deadline = deadline
    except AllocationError as exc:
        allocator_or_error = exc
    nodes = scenario.get("nodes") if isinstance(scenario, Mapping) else None
    if nodes:
        return {
            "nodes": [
                {
                    "node": str(((node or {}).get("metadata") or {}).get("name", "")),
                    **scenario_output(allocator_or_error, node, claims),
                }
                for node in nodes
            ]
        }
    node = scenario.get("node") if isinstance(scenario, Mapping) else None
    if node is None and not isinstance(allocator_or_error, AllocationError):
        allocator_or_error = ScenarioError("scenario: needs node or nodes")
    return scenario_output(allocator_or_error, node, claims)


def allocator_from_scenario(
    scenario: Mapping[str, Any],
    *,
    share_id_factory: Callable[[], str] | None = None,
    selector_cache: SelectorCache | None = None,
    slice_cache: SliceCache | None = None,
) -> Allocator:
    """Build an Allocator from a scenario's features, classes, slices and allocated state."""
    features = Features.from_dict(scenario.get("features"))
    return Allocator(
        classes=list(scenario.get("classes") or []),
        slices=list(scenario.get("slices") or []),
        features=features,
        allocated_state=AllocatedState.from_scenario(scenario, features=features),
        selector_cache=selector_cache,
        slice_cache=slice_cache,
        share_id_factory=share_id_factory,
    )
