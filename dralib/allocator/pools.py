"""ResourceSlices parsed once, node selection, and the pools a node can use (upstream pools.go).

A pool is the set of slices with the same driver and pool name; only its highest generation
counts, and it is complete when all `resourceSliceCount` slices of that generation are present.
`gather_pools` returns the pools relevant for one node, sorted by driver and pool name, with pools
holding devices with binding conditions last, exactly like upstream's experimental allocator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from dralib.allocator.cel import plain_domains
from dralib.allocator.limits import check_device, check_slice
from dralib.allocator.nodeselection import NodeInfo, NodeSelector, node_matches
from dralib.allocator.quantity import Quantity
from dralib.allocator.types import (
    JSON,
    AllocationError,
    Features,
    ScenarioError,
    quantity_field,
)

_EMPTY_MAP: dict[str, Any] = {}
# One empty sequence for every device without taints or conditions: a new list each cost 56
# bytes a field, 15 MB at 100,000 devices.
_NONE: tuple[Any, ...] = ()


_LAZY_DEVICE_FIELDS: dict[str, Callable[[JSON], Any]] = {
    "attributes": lambda raw: raw.get("attributes") or _EMPTY_MAP,
    "capacity_raw": lambda raw: raw.get("capacity") or _EMPTY_MAP,
    "node_name": lambda raw: raw.get("nodeName"),
    "node_selector_raw": lambda raw: raw.get("nodeSelector"),
    "all_nodes": lambda raw: bool(raw.get("allNodes")),
    "taints": lambda raw: raw.get("taints") or _NONE,
    "binds_to_node": lambda raw: bool(raw.get("bindsToNode")),
    "binding_conditions": lambda raw: raw.get("bindingConditions") or _NONE,
    "binding_failure_conditions": lambda raw: raw.get("bindingFailureConditions") or _NONE,
    "allow_multiple_allocations": lambda raw: raw.get("allowMultipleAllocations"),
    "consumes_counters_raw": lambda raw: raw.get("consumesCounters") or _NONE,
    "attribute_lookups": lambda raw: {},
}


ContentKey = tuple[str, bool | None, bytes | str]

# Parsed `consumesCounters` by the id of the raw list (see DeviceInfo.consumes_counters); a few
# thousand distinct ones at most in a real cluster (one per device profile and counter set).
_PARSED_CONSUMPTIONS: dict[int, tuple[Any, list[tuple[str, dict[str, Quantity]]]]] = {}
_PARSED_CONSUMPTIONS_KEPT = 8192


def content_key(
    driver: str, attributes: Any, capacity: Any, allow_multiple_allocations: bool | None
) -> ContentKey:
    """A key equal for two devices exactly when a selector sees the same content in them.

    orjson's text of JSON values is injective and several times faster to make than repr()
    (made for every device a search reaches first). It writes NaN and infinities as null and
    refuses integers past 64 bits and non-string keys: content with a null, or refused, is keyed
    by repr(), also injective (a str key never equals a bytes key).
    """
    try:
        text: bytes | str = orjson.dumps((attributes, capacity))
    except TypeError:
        text = repr((attributes, capacity))
    else:
        if b"null" in text:
            text = repr((attributes, capacity))
    return (driver, allow_multiple_allocations, text)


class DeviceInfo:
    """One device of a ResourceSlice; values derived from it are computed on first use.

    The search touches a few fields of many devices, so plain slots are read directly and
    everything else (parsed quantities, selectors, the CEL content key) waits until needed.
    """

    __slots__ = (
        "_capacity",
        "_capacity_has_policy",
        "_consumes_counters",
        "_content_key",
        "_index",
        "_node_selector",
        "_plain_domains",
        "_where",
        "all_nodes",
        "allow_multiple_allocations",
        "attribute_lookups",
        "attributes",
        "binding_conditions",
        "binding_failure_conditions",
        "binds_to_node",
        "capacity_raw",
        "consumes_counters_raw",
        "driver",
        "name",
        "node_name",
        "node_selector_raw",
        "raw",
        "selections",
        "taints",
    )

    name: str
    raw: JSON
    driver: str
    attributes: dict[str, Any]
    capacity_raw: dict[str, Any]
    node_name: str | None
    node_selector_raw: JSON | None
    all_nodes: bool
    taints: Sequence[JSON]
    binds_to_node: bool
    binding_conditions: Sequence[str]
    binding_failure_conditions: Sequence[str]
    allow_multiple_allocations: bool | None
    consumes_counters_raw: Sequence[JSON]
    attribute_lookups: dict[str, Any]

    def __init__(self, raw: JSON, *, driver: str, where: str, index: int | None = None) -> None:
        # Only what every pass needs is read here; other slots are filled on first access by
        # __getattr__, so devices the search never reaches cost almost nothing.
        self.raw = raw
        self.name = raw["name"]
        self.driver = driver
        # With an index, `where` names the slice (one string for all its devices) and the
        # device's own is made when an error needs it: 80 bytes less a device.
        self._where = where
        self._index = index
        self._content_key: ContentKey | None = None
        self._capacity: dict[str, CapacityInfo] | None = None
        self._capacity_has_policy: bool | None = None
        self._consumes_counters: list[tuple[str, dict[str, Quantity]]] | None = None
        self._node_selector: NodeSelector | None | bool = False
        self._plain_domains: tuple[str, ...] | None | bool = False
        # Selection results by (CEL options, class selectors, request selectors): see
        # SelectorCache.select.
        self.selections: tuple[Any, Any] | dict[Any, Any] | None = None

    @property
    def where(self) -> str:
        """Where the device is, for messages: `ResourceSlice s: spec.devices[3]`."""
        if self._index is None:
            return self._where
        return f"{self._where}: spec.devices[{self._index}]"

    def __getattr__(self, name: str) -> Any:
        # Called only for a slot not yet filled: fill all of them in one go.
        if name not in _LAZY_DEVICE_FIELDS:
            raise AttributeError(name)
        raw = self.raw
        # Per-device API limits are checked here, once, before anything uses the device.
        check_device(raw, where=self.where)
        for field_name, read in _LAZY_DEVICE_FIELDS.items():
            setattr(self, field_name, read(raw))
        if not isinstance(self.attributes, dict) or not isinstance(self.capacity_raw, dict):
            raise ScenarioError(f"{self.where} ({self.name}): attributes and capacity must be maps")
        return getattr(self, name)

    @property
    def node_selector(self) -> NodeSelector | None:
        """The parsed per-device node selector, if any."""
        if self._node_selector is False:
            raw = self.node_selector_raw
            self._node_selector = NodeSelector(raw) if raw is not None else None
        return self._node_selector  # type: ignore[return-value]

    @property
    def plain_domains(self) -> tuple[str, ...] | None:
        """Attribute domains when the device's CEL input cannot fail (cel.plain_domains)."""
        domains = self._plain_domains
        if domains is False:
            domains = plain_domains(self.driver, self.attributes, self.capacity_raw)
            self._plain_domains = domains
        return domains  # type: ignore[return-value]

    @property
    def content_key(self) -> ContentKey:
        """What CEL can see of the device; equal keys give equal selector results."""
        key = self._content_key
        if key is None:
            key = content_key(
                self.driver, self.attributes, self.capacity_raw, self.allow_multiple_allocations
            )
            self._content_key = key
        return key

    @property
    def capacity(self) -> dict[str, CapacityInfo]:
        """Capacity entries with parsed quantities and request policy."""
        if self._capacity is None:
            self._capacity = {
                name: CapacityInfo.parse(value, where=f"{self.where}.capacity.{name}")
                for name, value in self.capacity_raw.items()
            }
        return self._capacity

    @property
    def capacity_has_policy(self) -> bool:
        """True if any capacity has a request policy (then defaults may not match the value)."""
        has = self._capacity_has_policy
        if has is None:
            has = any(
                isinstance(value, dict) and value.get("requestPolicy") is not None
                for value in self.capacity_raw.values()
            )
            self._capacity_has_policy = has
        return has

    @property
    def consumes_counters(self) -> list[tuple[str, dict[str, Quantity]]]:
        """(counter set name, counter name -> consumed amount) per consumption entry."""
        if self._consumes_counters is None:
            raw = self.consumes_counters_raw
            # Equal consumptions read from the database are one object (claims' listing shares
            # them): parsed once for all the devices (20 MB at 100,000 devices), never changed.
            known = _PARSED_CONSUMPTIONS.get(id(raw))
            if known is not None and known[0] is raw:
                self._consumes_counters = known[1]
                return known[1]
            result = []
            for index, entry in enumerate(self.consumes_counters_raw):
                where = f"{self.where}.consumesCounters[{index}]"
                counters = {
                    name: quantity_field(
                        (value or {}).get("value"), where=f"{where}.counters.{name}.value"
                    )
                    for name, value in (entry.get("counters") or {}).items()
                }
                result.append((str(entry.get("counterSet", "")), counters))
            self._consumes_counters = result
            if raw:
                if len(_PARSED_CONSUMPTIONS) >= _PARSED_CONSUMPTIONS_KEPT:
                    _PARSED_CONSUMPTIONS.clear()
                # The raw object is kept with its result: its id cannot be reused meanwhile.
                _PARSED_CONSUMPTIONS[id(raw)] = (raw, result)
        return self._consumes_counters


@dataclass(slots=True)
class CapacityInfo:
    """A device capacity value with its optional request policy (slots: one per capacity of
    every device the search reaches)."""

    value: Quantity
    default: Quantity | None = None
    valid_values: list[Quantity] | None = None
    has_policy: bool = False
    valid_range: bool = False
    range_min: Quantity | None = None
    range_max: Quantity | None = None
    range_step: Quantity | None = None

    @classmethod
    def parse(cls, raw: Any, *, where: str) -> CapacityInfo:
        """Parse one entry of `device.capacity`."""
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: expected an object with a value")
        info = cls(value=quantity_field(raw.get("value"), where=f"{where}.value"))
        policy = raw.get("requestPolicy")
        if policy is not None:
            info.has_policy = True
            if policy.get("default") is not None:
                info.default = quantity_field(
                    policy["default"], where=f"{where}.requestPolicy.default"
                )
            if policy.get("validValues") is not None:
                info.valid_values = [
                    quantity_field(v, where=f"{where}.requestPolicy.validValues")
                    for v in policy["validValues"]
                ]
            valid_range = policy.get("validRange")
            if valid_range is not None:
                info.valid_range = True
                for key in ("min", "max", "step"):
                    if valid_range.get(key) is not None:
                        quantity = quantity_field(
                            valid_range[key], where=f"{where}.requestPolicy.validRange.{key}"
                        )
                        setattr(info, f"range_{key}", quantity)
        return info


@dataclass(eq=False)
class SliceInfo:
    """A ResourceSlice reduced to what the allocator uses; `raw` keeps the object."""

    name: str
    raw: JSON
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str | None
    node_selector_raw: JSON | None
    all_nodes: bool
    per_device_node_selection: bool | None
    shared_counters_raw: list[JSON]
    devices: list[DeviceInfo]
    # What node keys read of the slice (`dralib.allocator.equivalence`), on first use.
    key_parts: Any = field(default=None, init=False, repr=False)

    @cached_property
    def node_selector(self) -> NodeSelector | None:
        """The parsed slice node selector, if any."""
        return NodeSelector(self.node_selector_raw) if self.node_selector_raw is not None else None

    @cached_property
    def shared_counters(self) -> list[tuple[str, dict[str, Quantity]]]:
        """(counter set name, counter name -> value) per shared counter set."""
        result = []
        for index, entry in enumerate(self.shared_counters_raw):
            where = f"ResourceSlice {self.name}: spec.sharedCounters[{index}]"
            counters = {
                name: quantity_field(
                    (value or {}).get("value"), where=f"{where}.counters.{name}.value"
                )
                for name, value in (entry.get("counters") or {}).items()
            }
            result.append((str(entry.get("name", "")), counters))
        return result

    @classmethod
    def parse(cls, raw: JSON, *, index: int) -> SliceInfo:
        """Parse a resource.k8s.io/v1 ResourceSlice object."""
        if not isinstance(raw, dict):
            raise ScenarioError(f"slices[{index}]: expected a ResourceSlice object")
        name = str((raw.get("metadata") or {}).get("name") or f"slices[{index}]")
        spec = raw.get("spec")
        where = f"ResourceSlice {name}"
        if not isinstance(spec, dict):
            raise ScenarioError(f"{where}: missing spec")
        driver = spec.get("driver")
        pool = spec.get("pool")
        if not isinstance(driver, str) or not driver:
            raise ScenarioError(f"{where}: spec.driver is required")
        if not isinstance(pool, dict) or not isinstance(pool.get("name"), str):
            raise ScenarioError(f"{where}: spec.pool.name is required")
        devices_raw = spec.get("devices") or []
        if not isinstance(devices_raw, list):
            raise ScenarioError(f"{where}: spec.devices must be a list")
        check_slice(spec, where=where)
        devices = [
            _parse_device(d, driver=driver, where=where, index=i) for i, d in enumerate(devices_raw)
        ]
        try:
            generation = int(pool.get("generation") or 0)
            count = int(pool.get("resourceSliceCount") or 0)
        except (TypeError, ValueError) as exc:
            raise ScenarioError(
                f"{where}: spec.pool generation and resourceSliceCount must be integers"
            ) from exc
        return cls(
            name=name,
            raw=raw,
            driver=driver,
            pool=pool["name"],
            generation=generation,
            resource_slice_count=count,
            node_name=spec.get("nodeName"),
            node_selector_raw=spec.get("nodeSelector"),
            all_nodes=bool(spec.get("allNodes")),
            per_device_node_selection=spec.get("perDeviceNodeSelection"),
            shared_counters_raw=list(spec.get("sharedCounters") or []),
            devices=devices,
        )


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


def _parse_device(raw: Any, *, driver: str, where: str, index: int) -> DeviceInfo:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ScenarioError(f"{where}: spec.devices[{index}]: expected a device with a name")
    return DeviceInfo(raw, driver=driver, where=where, index=index)


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
