"""The pools a node can use (upstream pools.go), built from parsed ResourceSlices.

A pool is the set of slices with the same driver and pool name; only its highest generation
counts, and it is complete when all `resourceSliceCount` slices of that generation are present.
`PoolBuilder.gather` returns the pools relevant for one node, sorted by driver and pool name,
with pools holding devices with binding conditions last, exactly like upstream's experimental
allocator. `SliceCache` keeps parsed slices (`dralib.allocator.slices`) and the pools built from
them across allocators.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dralib.allocator.nodeselection import NodeInfo, node_matches
from dralib.allocator.quantity import Quantity
from dralib.allocator.slices import SliceInfo
from dralib.allocator.types import JSON, AllocationError, Features


class SliceCache:
    """Parsed slices by object identity, for allocators built again from the same objects.

    Objects are treated as immutable, as informer objects are: a slice object seen before is not
    parsed again, and what was derived from its devices (CEL content keys, attribute lookups,
    parsed quantities) is reused.

    Threads: one cache is shared by concurrent what-if requests, so `retain` (a new snapshot) can
    run while other threads parse slices and build pools. Changes to the slice map are made under
    a lock, and `retain` walks a copy of the pool map, because allocators add pools to it without
    the lock; a pool added to the map that `retain` just replaced is only built again later.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, SliceInfo] = {}
        self._lock = threading.Lock()
        # Pools built from cached slices, shared by the allocators that use this cache.
        self.pools: dict[tuple[Any, ...], Pool] = {}

    def parse(self, raw: JSON, *, index: int) -> SliceInfo:
        """The SliceInfo for this object, parsed on first sight."""
        info = self._by_id.get(id(raw))
        if info is None or info.raw is not raw:
            info = SliceInfo.parse(raw, index=index)
            with self._lock:
                self._by_id[id(raw)] = info
        return info

    def __len__(self) -> int:
        return len(self._by_id)

    def retain(self, slices: Iterable[JSON]) -> int:
        """Forget slices other than these objects, and pools built from forgotten slices.

        A long-lived cache calls this when a new snapshot replaces the old one: slices that did
        not change are the same objects and stay parsed. Returns how many slices were dropped.
        """
        keep = {id(raw) for raw in slices}
        with self._lock:
            dropped = [key for key in self._by_id if key not in keep]
            for key in dropped:
                del self._by_id[key]
            kept_infos = {id(info) for info in self._by_id.values()}
        if dropped:
            built = _copy_of(self.pools)
            self.pools = {
                key: pool
                for key, pool in built.items()
                if all(id(info) in kept_infos for part in key[1:] for info in part)
            }
        return len(dropped)

    def forget(self, slices: Iterable[JSON]) -> int:
        """Forget these slice objects and the pools built from them; returns how many were known.

        For objects only one short-lived view held (a what-if's assumed nodes): the rest of the
        cache stays as it is.
        """
        gone = {id(raw) for raw in slices}
        with self._lock:
            dropped = [self._by_id.pop(key) for key in gone if key in self._by_id]
        if dropped:
            dropped_infos = {id(info) for info in dropped}
            # In place, unlike `retain`: long-lived allocators share this very map (their
            # PoolBuilder holds it), and must not keep the forgotten pools alive. The copy is made
            # in one step; allocators may add pools meanwhile, and a pool removed under an
            # allocator that still wants it is only built again.
            for key in _copy_of(self.pools):
                if any(id(info) in dropped_infos for part in key[1:] for info in part):
                    self.pools.pop(key, None)
        return len(dropped)

    def clear(self) -> None:
        """Forget every slice and pool, e.g. when a new snapshot replaces the old objects."""
        with self._lock:
            self._by_id.clear()
            self.pools = {}


def _copy_of(pools: dict[Any, Pool]) -> dict[Any, Pool]:
    """A copy of a pool map other threads add to without the lock.

    dict.copy() runs in C, but an allocation inside it may start the cyclic collector, whose
    finalizers can hand the interpreter to a thread that adds a pool: the copy then raises
    RuntimeError (seen under load). Adding only ever grows the map, so copying again succeeds.
    """
    while True:
        try:
            return pools.copy()
        except RuntimeError:
            continue


@dataclass
class Pool:
    """A resource pool as seen from one node (upstream Pool)."""

    driver: str
    name: str
    is_incomplete: bool = False
    is_invalid: bool = False
    invalid_reason: str = ""
    slices: list[SliceInfo] = field(default_factory=list)
    slices_not_targeting_node: list[SliceInfo] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    has_binding_conditions: bool = False

    @property
    def pool_id(self) -> str:
        """driver/pool, as upstream prints it."""
        return f"{self.driver}/{self.name}"


def _slice_relevant(info: SliceInfo, node: NodeInfo) -> bool | None:
    """True/False if the slice serves the node; None if it sets no known node selection."""
    if info.node_name or info.all_nodes or info.node_selector_raw is not None:
        try:
            return node_matches(
                node,
                node_name=info.node_name or "",
                all_nodes=info.all_nodes,
                selector=info.node_selector,
            )
        except AllocationError as exc:
            raise AllocationError(
                f"gather pool information: failed to perform node selection for slice "
                f"{info.name}: {exc}"
            ) from exc
    if info.per_device_node_selection:
        for device in info.devices:
            try:
                if node_matches(
                    node,
                    node_name=device.node_name or "",
                    all_nodes=device.all_nodes,
                    selector=device.node_selector,
                ):
                    return True
            except AllocationError as exc:
                raise AllocationError(
                    f"gather pool information: failed to perform node selection for device "
                    f"{device.name} in slice {info.name}: {exc}"
                ) from exc
        return False
    return None


class PoolBuilder:
    """Builds pools for nodes, reusing a built pool when the same slices make it up again."""

    def __init__(
        self,
        *,
        features: Features,
        all_slices: Sequence[SliceInfo],
        built: dict[tuple[Any, ...], Pool] | None = None,
    ) -> None:
        self.features = features
        self.all_slices = all_slices
        self._by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
        for info in all_slices:
            self._by_pool.setdefault((info.driver, info.pool), []).append(info)
        # Shared with a SliceCache when there is one.
        self._built: dict[tuple[Any, ...], Pool] = built if built is not None else {}

    def gather(self, slices_for_node: Sequence[SliceInfo], node: NodeInfo) -> list[Pool]:
        """Upstream GatherPools for one node."""
        features = self.features
        pools: dict[tuple[str, str], list[SliceInfo]] = {}
        for info in slices_for_node:
            if not features.PartitionableDevices and (
                info.per_device_node_selection is not None or info.shared_counters_raw
            ):
                continue
            if not _slice_relevant(info, node):
                continue
            key = (info.driver, info.pool)
            current = pools.get(key)
            if current is None or info.generation > current[0].generation:
                pools[key] = [info]
            elif info.generation == current[0].generation:
                current.append(info)

        result: list[Pool] = []
        with_binding_conditions: list[Pool] = []
        for key, slices in pools.items():
            expected = slices[0].resource_slice_count
            all_for_pool: list[SliceInfo] | None = None
            if len(slices) != expected:
                generation = slices[0].generation
                all_for_pool = []
                obsolete = False
                for info in self._by_pool.get(key, ()):
                    if info.generation == generation:
                        all_for_pool.append(info)
                    elif info.generation > generation:
                        obsolete = True
                        break
                if obsolete:
                    continue
                if len(all_for_pool) != expected:
                    result.append(Pool(driver=key[0], name=key[1], is_incomplete=True))
                    continue
            pool = self._build(key, slices, all_for_pool)
            if pool.has_binding_conditions:
                with_binding_conditions.append(pool)
            else:
                result.append(pool)

        result.sort(key=lambda p: (p.driver, p.name))
        with_binding_conditions.sort(key=lambda p: (p.driver, p.name))
        return result + with_binding_conditions

    @staticmethod
    def _has_binding_conditions(pool: Pool) -> bool:
        return any(
            "bindingConditions" in device.raw and device.raw["bindingConditions"] is not None
            for info in pool.slices
            for device in info.devices
        )

    def _build(
        self,
        key: tuple[str, str],
        slices: list[SliceInfo],
        all_for_pool: list[SliceInfo] | None,
    ) -> Pool:
        # Pools are immutable once built and depend only on their slices, so nodes served by the
        # same slices share one Pool object.
        # SliceInfo compares by identity; holding the objects in the key keeps them alive.
        cache_key = (self.features.PartitionableDevices, tuple(slices), tuple(all_for_pool or ()))
        pool = self._built.get(cache_key)
        if pool is None:
            pool = self._build_uncached(key, slices, all_for_pool)
            pool.has_binding_conditions = self._has_binding_conditions(pool)
            self._built[cache_key] = pool
        return pool

    def _build_uncached(
        self,
        key: tuple[str, str],
        slices: list[SliceInfo],
        all_for_pool: list[SliceInfo] | None,
    ) -> Pool:
        partitionable = self.features.PartitionableDevices
        slices = sorted(slices, key=lambda s: s.name)
        device_slices: list[SliceInfo] = []
        counter_slices: list[SliceInfo] = []
        not_targeting: list[SliceInfo] = []
        for info in slices:
            if partitionable and info.shared_counters_raw:
                counter_slices.append(info)
            else:
                device_slices.append(info)
        if all_for_pool is not None and len(slices) < len(all_for_pool):
            names = {info.name for info in slices}
            for info in all_for_pool:
                if info.name in names:
                    continue
                if partitionable and info.shared_counters_raw:
                    counter_slices.append(info)
                else:
                    not_targeting.append(info)

        def invalid(reason: str) -> Pool:
            return Pool(driver=key[0], name=key[1], is_invalid=True, invalid_reason=reason)

        seen: set[str] = set()
        for info in device_slices:
            for device in info.devices:
                if device.name in seen:
                    return invalid(f"duplicate device name {device.name}")
                seen.add(device.name)
        if not partitionable:
            return Pool(driver=key[0], name=key[1], slices=device_slices)

        counter_sets: dict[str, dict[str, Quantity]] = {}
        for info in counter_slices:
            for name, counters in info.shared_counters:
                if name in counter_sets:
                    return invalid(f"duplicate counter set name {name}")
                counter_sets[name] = counters
        for group in (device_slices, not_targeting):
            for info in group:
                for device in info.devices:
                    # The raw check keeps devices the search never reaches unexpanded.
                    if not device.raw.get("consumesCounters"):
                        continue
                    for set_name, counters in device.consumes_counters:
                        counter_set = counter_sets.get(set_name)
                        if counter_set is None:
                            return invalid(f"counter set {set_name} not found")
                        for counter_name in counters:
                            if counter_name not in counter_set:
                                return invalid(
                                    f"counter {counter_name} not found in counter set {set_name}"
                                )
        return Pool(
            driver=key[0],
            name=key[1],
            slices=device_slices,
            slices_not_targeting_node=not_targeting,
            counter_sets=counter_sets,
        )
