"""The demo's scheduler: the real allocator (`dralib.allocator`) over the demo's current objects.

`DemoAllocator` answers "allocate these claims for a pod on this node" the way the scheduler's
DRA plugin does: one `Allocator` built from the DeviceClasses and ResourceSlices (with
DeviceTaintRules applied to the devices they select, as the scheduler's slice tracker does) and
the results of every allocated claim. Building it costs a pass over every slice, so it is kept
until classes, slices or rules change; claims allocated or released in the meantime are recorded
in it (`record_allocation`, `release_allocation`). Its slice cache outlives rebuilds, so slices
that did not change stay parsed, and CEL results are shared by every demo allocator in the
process (they depend only on the expression and the device's content).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from demo.catalog import DemoError
from dralib.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    SelectorCache,
    SliceCache,
)
from dralib.allocator.taintrules import PatchedSlices, taint_rule

JSON = dict[str, Any]
ObjKey = tuple[str, str, str]
# Objects of one kind, in the order the demo created them.
ObjectsOfKind = Callable[[str], list[JSON]]

# The kinds whose objects the allocator is built from.
ALLOCATOR_INPUTS = frozenset({"DeviceClass", "ResourceSlice", "DeviceTaintRule"})

# Past this many CEL evaluations the shared selector cache is replaced, to bound its memory
# (a 1,000-node demo needs about 40,000).
_SELECTOR_CACHE_LIMIT = 500_000
_selector_cache = SelectorCache()


def _shared_selector_cache() -> SelectorCache:
    global _selector_cache
    if _selector_cache.evaluations > _SELECTOR_CACHE_LIMIT:
        _selector_cache = SelectorCache()
    return _selector_cache


def allocation_results(claim: JSON | None) -> list[JSON]:
    """The `status.allocation.devices.results` of a claim (empty when it is not allocated)."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


class DemoAllocator:
    """The real allocator over the objects `objects_of_kind` returns, kept in step with them.

    Tell it about changes: `inputs_changed` when a DeviceClass, ResourceSlice or
    DeviceTaintRule changed, `claim_changed` whenever a ResourceClaim is stored or removed.
    """

    def __init__(
        self, objects_of_kind: ObjectsOfKind, *, share_id_factory: Callable[[], str]
    ) -> None:
        self._objects_of_kind = objects_of_kind
        self._share_id_factory = share_id_factory
        # Results that hold devices, per claim: what the allocated state is computed from.
        self._held: dict[ObjKey, list[JSON]] = {}
        # Devices held whole (not shared, not adminAccess) per (driver, pool).
        self._dedicated: dict[tuple[str, str], set[str]] = {}
        # Rule-patched copies per original slice, kept while the slice and the rules are the same.
        self._patched = PatchedSlices()
        self._slice_cache = SliceCache()
        self._allocator: Allocator | None = None
        # The allocated state, kept in step with the claims once first computed, so that a
        # rebuilt allocator starts from it instead of every claim again.
        self._state: AllocatedState | None = None

    def inputs_changed(self) -> None:
        """Classes, slices or taint rules changed: build the allocator again when next needed."""
        self._allocator = None

    def claim_changed(self, key: ObjKey, claim: JSON | None) -> None:
        """A claim was stored (or removed, with None): count its allocation, forget the old."""
        results = allocation_results(claim)
        previous = self._held.pop(key, None)
        if previous is not None and previous == results:
            self._held[key] = previous
            return
        where = f"ResourceClaim {key[1]}/{key[2]}"
        try:
            if previous:
                for result in previous:
                    if not result.get("adminAccess") and "shareID" not in result:
                        pool = (str(result.get("driver")), str(result.get("pool")))
                        self._dedicated.get(pool, set()).discard(str(result.get("device")))
                if self._allocator is not None:
                    self._allocator.release_allocation([{"devices": {"results": previous}}])
                elif self._state is not None:
                    self._state.remove_results(previous, consumable_capacity=True, where=where)
            if not results:
                return
            self._held[key] = results
            for result in results:
                if not result.get("adminAccess") and "shareID" not in result:
                    pool = (str(result.get("driver")), str(result.get("pool")))
                    self._dedicated.setdefault(pool, set()).add(str(result.get("device")))
            if self._allocator is not None:
                self._allocator.record_allocation([{"devices": {"results": results}}])
            elif self._state is not None:
                self._state.add_results(results, consumable_capacity=True, where=where)
        except AllocationError as exc:
            raise DemoError(f"{where}: {exc}") from exc

    def dedicated_devices(self, driver: str, pool: str) -> set[str]:
        """Names of the pool's devices that some claim holds whole."""
        return set(self._dedicated.get((driver, pool), ()))

    def allocate(self, claims: Sequence[JSON], node: JSON) -> list[JSON] | None:
        """One AllocationResult per claim for a pod on `node`, or None if they do not fit there.

        Nothing is counted as allocated until the claims are stored with their allocation.
        """
        allocator = self._current()
        try:
            return allocator.allocate(node, claims)
        except AllocationError:
            # The scheduler leaves the pod unscheduled and retries later, e.g. for an "All"
            # request on a node that sees a pool being updated (zone-b's incomplete fabric).
            return None

    def _current(self) -> Allocator:
        if self._allocator is None:
            slices = self._slices()
            self._slice_cache.retain(slices)
            try:
                self._allocator = Allocator(
                    classes=self._objects_of_kind("DeviceClass"),
                    slices=slices,
                    allocated_state=self._allocated_state(),
                    selector_cache=_shared_selector_cache(),
                    slice_cache=self._slice_cache,
                    share_id_factory=self._share_id_factory,
                )
            except AllocationError as exc:
                raise DemoError(f"allocator: {exc}") from exc
        return self._allocator

    def _slices(self) -> list[JSON]:
        rules = [
            rule
            for rule in map(taint_rule, self._objects_of_kind("DeviceTaintRule"))
            if rule is not None
        ]
        return self._patched.apply(self._objects_of_kind("ResourceSlice"), rules)

    def _allocated_state(self) -> AllocatedState:
        if self._state is None:
            self._state = AllocatedState()
            for key, results in self._held.items():
                where = f"ResourceClaim {key[1]}/{key[2]}"
                try:
                    self._state.add_results(results, consumable_capacity=True, where=where)
                except AllocationError as exc:
                    raise DemoError(f"{where}: {exc}") from exc
        return self._state
