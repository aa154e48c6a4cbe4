"""One allocation attempt for one node: the backtracking search.

Request checks and candidate gathering happen first, in `dralib.allocator.candidates`; its
`Candidate`, `RequestData` and `RequestKey` are re-exported here for the search's callers.

This follows upstream's experimental allocator step by step (allocateOne, allocateDevice,
isSelectable), including the order in which devices, requests and subrequests are tried, so that
the first solution found is the same one. Where upstream leaves counters or constraint state
behind on a rejected candidate, so does this code: the answers depend on it.

Upstream's recursion becomes an explicit stack of generator frames (`Run.search`), so a search
over many claims is not limited by, and does not change, Python's recursion limit; the same loop
checks the optional time budget (`dralib.allocator.budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

from dralib.allocator import capacity as cap
from dralib.allocator.budget import CHECK_EVERY, SearchWatch
from dralib.allocator.candidates import (
    Candidate,
    RequestData,
    RequestKey,
    check_request,
    parse_constraints,
)
from dralib.allocator.constraints import Constraint
from dralib.allocator.counters import CounterSets, CounterTracker
from dralib.allocator.limits import ALLOCATION_RESULTS_MAX_SIZE
from dralib.allocator.nodeselection import NodeInfo, node_matches
from dralib.allocator.pools import Pool
from dralib.allocator.requests import ClaimInfo, RequestView
from dralib.allocator.selection import SelectionFailure, SelectorCache
from dralib.allocator.slices import DeviceInfo, SliceInfo
from dralib.allocator.taints import taint_prevents_allocation, tolerates
from dralib.allocator.types import (
    JSON,
    AllocatedState,
    AllocationError,
    ConsumedCapacity,
    DeviceID,
    Features,
    add_capacity,
    device_id_str,
    sub_capacity,
)

__all__ = [
    "DONE",
    "FAILED",
    "MAX_SIZE_EXCEEDED",
    "Candidate",
    "DeviceResult",
    "RequestData",
    "RequestKey",
    "Run",
    "taint_prevents_allocation",
    "tolerates",
]

# allocate_one outcomes; upstream uses (bool, error) with a sentinel error for the size limit.
DONE = 1
FAILED = 0
MAX_SIZE_EXCEEDED = -1

_REQUEST_CACHE_LIMIT = 4096

_START = (0, 0, 0)

# Arguments of one allocateOne call: claim, request, subrequest and device index, whether a
# specific subrequest is being allocated, and where in the pools to start looking.
Step = tuple[int, int, int, int, bool, tuple[int, int, int]]


@dataclass
class DeviceResult:
    """A device picked for a request during the search."""

    request: RequestView
    parent: str | None
    id: DeviceID
    device: DeviceInfo
    slice: SliceInfo
    share_id: str | None
    admin_access: bool | None
    consumed_capacity: ConsumedCapacity | None

    @property
    def request_name(self) -> str:
        """request or request/subrequest."""
        if self.parent is not None:
            return f"{self.parent}/{self.request.name}"
        return self.request.name


def _strip(message: str, prefix: str) -> str:
    # The CEL layer may already start its message with the kind of error; say it once.
    return message[len(prefix) :] if message.startswith(prefix) else message


class Run:
    """State of one Allocate call: the pools for the node, claims, and what is being allocated."""

    def __init__(
        self,
        *,
        features: Features,
        node: NodeInfo,
        pools: list[Pool],
        claims: list[ClaimInfo],
        classes: dict[str, JSON],
        allocated_state: AllocatedState,
        selectors: SelectorCache,
        counter_cache: dict[str, CounterSets],
        share_id_factory: Callable[[], str] | None,
        request_cache: dict[tuple[int, str | None], tuple[RequestView, RequestData]] | None = None,
        watch: SearchWatch | None = None,
    ) -> None:
        self.features = features
        # Time budget and cancellation; None searches without limit.
        self.watch = watch
        self.node = node
        self.pools = pools
        self.claims = claims
        self.classes = classes
        self.allocated_state = allocated_state
        self.selectors = selectors
        self.counters = CounterTracker(counter_cache, allocated_state)
        self.share_id_factory = share_id_factory or _random_share_id
        self.request_data: dict[RequestKey, RequestData] = {}
        # Which subrequest of a firstAvailable request the solution uses.
        self.selected_sub: dict[tuple[int, int], int] = {}
        # ExactCount request data does not depend on the node; the Allocator keeps it across
        # runs, keyed by the RequestView's id (the view is kept alive next to its data).
        self.request_cache: dict[tuple[int, str | None], tuple[RequestView, RequestData]] = (
            request_cache if request_cache is not None else {}
        )
        self.constraints: list[list[Constraint]] = [[] for _ in claims]
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.allocating_devices: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, ConsumedCapacity] = {}
        self.num_allocate_one = 0

    def prepare(self) -> None:
        """Check every request and constraint before searching (upstream Allocate, first half)."""
        features = self.features
        for claim_index, claim in enumerate(self.claims):
            min_devices = 0
            for request_index, request in enumerate(claim.requests):
                if not features.PrioritizedList and request.subrequests:
                    raise AllocationError(
                        f"claim {claim.ref}, request {request.name}: has subrequests, but the "
                        "DRAPrioritizedList feature is disabled"
                    )
                if not features.ConsumableCapacity:
                    if request.exact is not None and request.exact.capacity_raw is not None:
                        raise AllocationError(
                            f"claim {claim.ref}, request {request.name}: has capacity requests, "
                            "but the DRAConsumableCapacity feature is disabled"
                        )
                    for sub in request.subrequests:
                        if sub.capacity_raw is not None:
                            raise AllocationError(
                                f"claim {claim.ref}, subrequest {sub.name}: has capacity "
                                "requests, but the DRAConsumableCapacity feature is disabled"
                            )
                if request.subrequests:
                    smallest: int | None = None
                    for sub_index, sub in enumerate(request.subrequests):
                        key = (claim_index, request_index, sub_index)
                        data = self._validate_request(sub, request.name, key)
                        self.request_data[key] = data
                        if smallest is None or data.num_devices < smallest:
                            smallest = data.num_devices
                    min_devices += smallest or 0
                else:
                    assert request.exact is not None
                    key = (claim_index, request_index, 0)
                    data = self._validate_request(request.exact, None, key)
                    self.request_data[key] = data
                    min_devices += data.num_devices
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim.ref}: number of requested devices {min_devices} exceeds the "
                    f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            self.constraints[claim_index] = parse_constraints(
                claim, list_types=features.ListTypeAttributes
            )

    def _validate_request(
        self, request: RequestView, parent: str | None, key: RequestKey
    ) -> RequestData:
        cached = self.request_cache.get((id(request), parent))
        if cached is not None and cached[0] is request:
            return cached[1]
        data = self._validate_request_uncached(request, parent, key)
        if request.allocation_mode != "All":
            if len(self.request_cache) >= _REQUEST_CACHE_LIMIT:
                self.request_cache.clear()
            self.request_cache[(id(request), parent)] = (request, data)
        return data

    def _validate_request_uncached(
        self, request: RequestView, parent: str | None, key: RequestKey
    ) -> RequestData:
        def usable(
            data: RequestData, info: SliceInfo, device: DeviceInfo, device_id: DeviceID
        ) -> bool:
            if not self.is_selectable(key, data, info, device):
                return False
            if not self.features.ConsumableCapacity:
                return True
            return self.capacity_fits(request, device_id, device)

        return check_request(
            request,
            parent=parent,
            claim=self.claims[key[0]],
            features=self.features,
            classes=self.classes,
            pools=self.pools,
            usable=usable,
        )

    def is_selectable(
        self, key: RequestKey, data: RequestData, info: SliceInfo, device: DeviceInfo
    ) -> bool:
        """Class and request selectors match, and the device serves the node (isSelectable)."""
        if device.binding_conditions and not self.features.DeviceBindingAndStatus:
            return False
        result = self.selectors.select(data.class_exprs, data.request_exprs, device)
        if result is not True:
            if result is False:
                return False
            self._raise_selection_failure(key, data, info, device, result)
        if info.per_device_node_selection:
            return node_matches(
                self.node,
                node_name=device.node_name or "",
                all_nodes=device.all_nodes,
                selector=device.node_selector,
            )
        return True

    def _raise_selection_failure(
        self,
        key: RequestKey,
        data: RequestData,
        info: SliceInfo,
        device: DeviceInfo,
        failure: SelectionFailure,
    ) -> None:
        who = (
            f"class {data.class_name}"
            if failure.from_class
            else (f"claim {self.claims[key[0]].ref}")
        )
        if failure.runtime:
            raise AllocationError(
                f"{who}: selector #{failure.selector_index} on device {info.driver}/{info.pool}/"
                f"{device.name}: CEL runtime error: "
                f"{_strip(failure.message, 'CEL runtime error: ')}"
            )
        raise AllocationError(
            f"{who}: selector #{failure.selector_index}: CEL compile error: "
            f"{_strip(failure.message, 'CEL compile error: ')}"
        )

    def capacity_fits(self, request: RequestView, device_id: DeviceID, device: DeviceInfo) -> bool:
        """Upstream CmpRequestOverCapacity; a request for an undefined capacity does not fit."""
        consumed = self.allocated_state.aggregated_capacity.get(device_id)
        allocating = self.allocating_capacity.get(device_id)
        if (
            consumed is None
            and allocating is None
            and not request.capacity_requests
            and not device.capacity_has_policy
        ):
            # Nothing requested, nothing consumed, no policy: each share would take the whole
            # value, which always fits an unused device.
            return True
        try:
            return cap.fits(
                consumed=consumed,
                requests=request.capacity_requests,
                capacity=device.capacity,
                allocating=allocating,
            )
        except cap.UndefinedCapacityError:
            return False

    def device_in_use(self, device_id: DeviceID) -> bool:
        """Allocated before, or being allocated for any claim."""
        return device_id in self.allocated_state.allocated_devices or bool(
            self.allocating_devices.get(device_id)
        )

    def search(self) -> int:
        """Run the backtracking search; DONE if every claim got its devices.

        Upstream's allocateOne recurses once per device, request and claim. Here each of those
        calls is a generator frame (`_allocate_one`) on an explicit stack, in the same order and
        with the same outcomes, so the depth of the search is not bounded by Python's recursion
        limit. The driver loop is also where the time budget is checked.
        """
        stack: list[Generator[Step, int, int]] = [self._allocate_one(0, 0, 0, 0, False, _START)]
        outcome = 0
        fresh = True
        watch = self.watch
        next_check = CHECK_EVERY
        if watch is not None:
            # A deadline that passed before this node's turn stops it before any work.
            watch.check(steps=0, claim_index=0)
        while True:
            frame = stack[-1]
            try:
                step = next(frame) if fresh else frame.send(outcome)
            except StopIteration as stop:
                stack.pop()
                outcome = int(stop.value)
                if not stack:
                    return outcome
                fresh = False
                continue
            if watch is not None and self.num_allocate_one >= next_check:
                next_check = self.num_allocate_one + CHECK_EVERY
                watch.check(steps=self.num_allocate_one, claim_index=step[0])
            stack.append(self._allocate_one(*step))
            fresh = True

    def _allocate_one(
        self,
        claim_index: int,
        request_index: int,
        sub_index: int,
        device_index: int,
        allocate_sub: bool,
        start: tuple[int, int, int],
    ) -> Generator[Step, int, int]:
        """Find a device for one position in one request (upstream allocateOne).

        Each `yield` is upstream's recursive call: it hands the arguments of the next position
        to `search` and receives that call's outcome.
        """
        claims = self.claims
        while True:
            self.num_allocate_one += 1
            if claim_index >= len(claims):
                return DONE
            claim = claims[claim_index]
            if request_index >= len(claim.requests):
                if claim_index + 1 >= len(claims):
                    # The call for the next claim would only report success; answer it here.
                    self.num_allocate_one += 1
                    return DONE
                outcome = yield (claim_index + 1, 0, 0, 0, False, _START)
                return FAILED if outcome == MAX_SIZE_EXCEEDED else outcome

            key = (claim_index, request_index, sub_index)
            data = self.request_data[key]
            if not allocate_sub and data.parent is not None:
                all_exceeded = True
                candidate_sub = 0
                while (claim_index, request_index, candidate_sub) in self.request_data:
                    outcome = yield (
                        claim_index,
                        request_index,
                        candidate_sub,
                        device_index,
                        True,
                        _START,
                    )
                    if outcome == MAX_SIZE_EXCEEDED:
                        candidate_sub += 1
                        continue
                    all_exceeded = False
                    if outcome == DONE:
                        self.selected_sub[(claim_index, request_index)] = candidate_sub
                        return DONE
                    candidate_sub += 1
                return MAX_SIZE_EXCEEDED if all_exceeded else FAILED

            request = data.request
            do_all = request.allocation_mode == "All"
            if do_all and not data.all_devices:
                return FAILED
            if device_index < data.num_devices:
                break
            # Upstream's call for the next request returns its outcome unchanged, so it runs
            # in this frame instead of a new one.
            request_index, sub_index, device_index, allocate_sub = request_index + 1, 0, 0, False
            start = _START

        if (
            len(self.results[claim_index]) + data.num_devices - device_index
            > ALLOCATION_RESULTS_MAX_SIZE
        ):
            return MAX_SIZE_EXCEEDED

        if do_all:
            candidate = data.all_devices[device_index]
            deallocate = self.allocate_device(key, data, candidate, must=True)
            if deallocate is None:
                return FAILED
            outcome = yield (
                claim_index,
                request_index,
                sub_index,
                device_index + 1,
                allocate_sub,
                _START,
            )
            if outcome != DONE:
                deallocate()
            return outcome

        admin = request.admin_access
        consumable = self.features.ConsumableCapacity
        allocated = self.allocated_state.allocated_devices
        allocating = self.allocating_devices
        start_pool, start_slice, start_device = start
        pools = self.pools
        # The device for this position completes every claim.
        last_position = (
            device_index + 1 >= data.num_devices
            and request_index + 1 >= len(claim.requests)
            and claim_index + 1 >= len(claims)
        )
        for pool_index in range(start_pool, len(pools)):
            pool = pools[pool_index]
            if pool.is_incomplete or pool.is_invalid:
                continue
            slices = pool.slices
            slice_start = start_slice if pool_index == start_pool else 0
            for slice_index in range(slice_start, len(slices)):
                info = slices[slice_index]
                devices = info.devices
                first = (
                    start_device if pool_index == start_pool and slice_index == start_slice else 0
                )
                for dev_index in range(first, len(devices)):
                    device = devices[dev_index]
                    device_id = (pool.driver, pool.name, device.name)
                    if admin:
                        claims_allocating = allocating.get(device_id)
                        if claims_allocating and claim_index in claims_allocating:
                            continue
                    elif device_id in allocated or allocating.get(device_id):
                        continue
                    if not self.is_selectable(key, data, info, device):
                        continue
                    if consumable and not self.capacity_fits(request, device_id, device):
                        continue
                    deallocate = self.allocate_device(
                        key, data, Candidate(device_id, device, info, pool), must=False
                    )
                    if deallocate is None:
                        continue
                    if last_position:
                        # The calls for the next device, request and claim would each only
                        # pass success on; count them as upstream does and stop here.
                        self.num_allocate_one += 3
                        return DONE
                    outcome = yield (
                        claim_index,
                        request_index,
                        sub_index,
                        device_index + 1,
                        allocate_sub,
                        (pool_index, slice_index, dev_index + 1),
                    )
                    if outcome == DONE:
                        return DONE
                    deallocate()
                    if outcome == MAX_SIZE_EXCEEDED:
                        return MAX_SIZE_EXCEEDED
        return FAILED

    def allocate_device(
        self, key: RequestKey, data: RequestData, candidate: Candidate, *, must: bool
    ) -> Callable[[], None] | None:
        """Take the candidate if it is free and satisfies the constraints (allocateDevice).

        Returns a function that undoes the allocation, or None if the candidate cannot be used.
        """
        claim_index = key[0]
        request = data.request
        device = candidate.device
        device_id = candidate.id
        features = self.features
        allow_multiple = features.ConsumableCapacity and device.allow_multiple_allocations is True
        allocating_for = self.allocating_devices.get(device_id)
        if (
            not allow_multiple
            and request.admin_access
            and allocating_for
            and claim_index in allocating_for
        ):
            return None
        if not request.admin_access and self.device_in_use(device_id):
            return None
        consumes_counters = bool(device.consumes_counters_raw)
        if not features.PartitionableDevices and consumes_counters:
            return None
        skip_counter_check = allow_multiple and (
            device_id in self.allocated_state.aggregated_capacity
            or device_id in self.allocating_capacity
        )
        if (
            not skip_counter_check
            and consumes_counters
            and not self.counters.try_consume(device, candidate.pool)
        ):
            return None

        if data.parent is None:
            base_name, sub_name = request.name, ""
        else:
            base_name, sub_name = data.parent, request.name

        # A rejected candidate keeps the counters it consumed above, as upstream does.
        if features.DeviceTaints and taint_prevents_allocation(device, request):
            return None

        constraints = self.constraints[claim_index]
        for index, constraint in enumerate(constraints):
            if not constraint.add(base_name, sub_name, device):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[claim_index].ref}, request {request.name}: cannot "
                        f"add device {device_id_str(device_id)} because a claim constraint "
                        "would not be satisfied"
                    )
                for previous in constraints[:index]:
                    previous.remove(base_name, sub_name, device)
                return None

        claims_for_device = self.allocating_devices.setdefault(device_id, set())
        if not allow_multiple:
            claims_for_device.add(claim_index)

        consumed: ConsumedCapacity = {}
        share_id: str | None = None
        if features.ConsumableCapacity:
            if not self.capacity_fits(request, device_id, device):
                return None
            if allow_multiple:
                consumed = cap.consumed_by_request(request.capacity_requests, device.capacity)
                share_id = self.share_id_factory()
                existing = self.allocating_capacity.get(device_id)
                if existing is None:
                    self.allocating_capacity[device_id] = dict(consumed)
                else:
                    add_capacity(existing, consumed)

        results = self.results[claim_index]
        previous_len = len(results)
        results.append(
            DeviceResult(
                request=request,
                parent=data.parent,
                id=device_id,
                device=device,
                slice=candidate.slice,
                share_id=share_id,
                admin_access=True if request.admin_access else None,
                consumed_capacity=consumed or None,
            )
        )

        def deallocate() -> None:
            for constraint in constraints:
                constraint.remove(base_name, sub_name, device)
            claims_for_device.discard(claim_index)
            if allow_multiple:
                taken = results[previous_len].consumed_capacity
                if taken is not None:
                    existing = self.allocating_capacity.get(device_id)
                    if existing is not None:
                        sub_capacity(existing, taken)
                        if cap.is_empty(existing):
                            del self.allocating_capacity[device_id]
            elif features.PartitionableDevices and consumes_counters:
                self.counters.release(device, candidate.pool)
            del results[previous_len:]

        return deallocate


def _random_share_id() -> str:
    """A random UUID as the share ID of a device allocated more than once (upstream's choice)."""
    # Imported here: uuid loads `platform` and more, a cost every run of the command-line
    # allocator paid although most scenarios share no device.
    import uuid

    return str(uuid.uuid4())
