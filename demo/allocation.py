"""The demo's scheduler: the real allocator (`claims.allocator`) over the demo's current objects.

`DemoAllocator` answers "allocate these claims for a pod on this node" the way the scheduler's
DRA plugin does: one `Allocator` built from the DeviceClasses and ResourceSlices (with
DeviceTaintRules applied to the devices they select, as the scheduler's slice tracker does) and
the results of every allocated claim. Building it costs a pass over every slice, so it is kept
until classes, slices or rules change; a new allocation is added to it with
`record_allocation`, and a released one only marks the allocated state to be recomputed from the
claims before the next allocation. The slice and selector caches outlive rebuilds, so slices that
did not change stay parsed and CEL results stay known.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from claims.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    NodeAllocationError,
    SelectorCache,
    SliceCache,
)
from demo.catalog import DemoError

JSON = dict[str, Any]
ObjKey = tuple[str, str, str]
# Objects of one kind, in the order the demo created them.
ObjectsOfKind = Callable[[str], list[JSON]]

# The kinds whose objects the allocator is built from.
ALLOCATOR_INPUTS = frozenset({"DeviceClass", "ResourceSlice", "DeviceTaintRule"})


def allocation_results(claim: JSON | None) -> list[JSON]:
    """The `status.allocation.devices.results` of a claim (empty when it is not allocated)."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _rule_matches(rule: JSON, driver: str, pool: str, device: str | None) -> bool:
    selector = (rule.get("spec") or {}).get("deviceSelector") or {}
    return (
        selector.get("driver") in (None, "", driver)
        and selector.get("pool") in (None, "", pool)
        and (device is None or selector.get("device") in (None, "", device))
    )


def apply_taint_rules(resource_slice: JSON, rules: Sequence[JSON]) -> JSON:
    """The slice with each rule's taint added to the devices the rule selects.

    The slice itself is returned when no rule selects its pool, so that the allocator's slice
    cache keeps it parsed.
    """
    spec = resource_slice.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    matching = [rule for rule in rules if _rule_matches(rule, driver, pool, None)]
    if not matching:
        return resource_slice
    patched = copy.deepcopy(resource_slice)
    for device in patched["spec"].get("devices") or []:
        for rule in matching:
            taint = (rule.get("spec") or {}).get("taint")
            if taint and _rule_matches(rule, driver, pool, str(device.get("name") or "")):
                device.setdefault("taints", []).append(dict(taint))
    return patched


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
        self._patched: dict[int, tuple[JSON, JSON]] = {}
        self._patched_rules: list[JSON] = []
        self._slice_cache = SliceCache()
        self._selector_cache: SelectorCache | None = None
        self._allocator: Allocator | None = None
        self._state_stale = False

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
        if previous:
            for result in previous:
                if not result.get("adminAccess") and "shareID" not in result:
                    pool = (str(result.get("driver")), str(result.get("pool")))
                    self._dedicated.get(pool, set()).discard(str(result.get("device")))
            # AllocatedState only grows; recompute it from the claims before the next use.
            self._state_stale = True
        if not results:
            return
        self._held[key] = results
        for result in results:
            if not result.get("adminAccess") and "shareID" not in result:
                pool = (str(result.get("driver")), str(result.get("pool")))
                self._dedicated.setdefault(pool, set()).add(str(result.get("device")))
        if self._allocator is not None and not self._state_stale:
            try:
                self._allocator.record_allocation([{"devices": {"results": results}}])
            except AllocationError as exc:
                raise DemoError(f"ResourceClaim {key[1]}/{key[2]}: {exc}") from exc

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
        except NodeAllocationError:
            # The scheduler treats this node as unsuitable and tries others.
            return None
        except AllocationError as exc:
            # Every claim and class is the demo's own, so this is a bug in the demo's objects.
            raise DemoError(f"allocator: {exc}") from exc

    def _current(self) -> Allocator:
        if self._allocator is None:
            slices = self._slices()
            self._slice_cache.retain(slices)
            try:
                self._allocator = Allocator(
                    classes=self._objects_of_kind("DeviceClass"),
                    slices=slices,
                    allocated_state=self._allocated_state(),
                    selector_cache=self._selector_cache,
                    slice_cache=self._slice_cache,
                    share_id_factory=self._share_id_factory,
                )
            except AllocationError as exc:
                raise DemoError(f"allocator: {exc}") from exc
            self._selector_cache = self._allocator.selector_cache
            self._state_stale = False
        elif self._state_stale:
            self._allocator.allocated_state = self._allocated_state()
            self._state_stale = False
        return self._allocator

    def _slices(self) -> list[JSON]:
        rules = self._objects_of_kind("DeviceTaintRule")
        if rules != self._patched_rules:
            self._patched = {}
            self._patched_rules = rules
        patched: dict[int, tuple[JSON, JSON]] = {}
        slices = []
        for resource_slice in self._objects_of_kind("ResourceSlice"):
            entry = self._patched.get(id(resource_slice))
            if entry is None or entry[0] is not resource_slice:
                entry = (resource_slice, apply_taint_rules(resource_slice, rules))
            patched[id(resource_slice)] = entry
            slices.append(entry[1])
        self._patched = patched
        return slices

    def _allocated_state(self) -> AllocatedState:
        state = AllocatedState()
        for key, results in self._held.items():
            try:
                state.add_results(
                    results, consumable_capacity=True, where=f"ResourceClaim {key[1]}/{key[2]}"
                )
            except AllocationError as exc:
                raise DemoError(str(exc)) from exc
        return state
