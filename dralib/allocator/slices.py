"""ResourceSlices parsed once: their devices, capacities and counters (upstream's slice types).

The search touches a few fields of many devices, so a `DeviceInfo` reads what every pass needs
when it is made and everything else (parsed quantities, node selectors, what CEL sees) on first
use; a `SliceInfo` keeps the object and what the allocator reads of its spec. Pools are made of
them in `dralib.allocator.pools`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from dralib.allocator.cel import plain_domains
from dralib.allocator.limits import check_device, check_slice
from dralib.allocator.nodeselection import NodeSelector
from dralib.allocator.quantity import Quantity
from dralib.allocator.types import JSON, ScenarioError, quantity_field

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


def _parse_device(raw: Any, *, driver: str, where: str, index: int) -> DeviceInfo:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ScenarioError(f"{where}: spec.devices[{index}]: expected a device with a name")
    return DeviceInfo(raw, driver=driver, where=where, index=index)
