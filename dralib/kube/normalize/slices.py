"""The API server's validation of ResourceSlices and DeviceTaintRules, on the v1 shape.

From `validateResourceSliceSpec` and `validateDevice` of k8s.io/kubernetes
pkg/apis/resource/validation: node selection, pool, devices (names, attributes, capacity,
taints, counters) and the size limits that keep one slice small.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import names
from .validation import (
    ATTRIBUTE_VALUE_MAX_LENGTH,
    ATTRIBUTES_AND_CAPACITIES_MAX,
    COUNTER_CONSUMPTIONS_MAX,
    COUNTER_SETS_MAX,
    COUNTERS_PER_SET_MAX,
    DEVICE_TAINTS_MAX,
    SEMVER,
    SLICE_MAX_DEVICES,
    SLICE_MAX_DEVICES_ADVANCED,
    TAINT_EFFECTS,
    VALUE_TYPES,
    Fail,
    at_most,
    check_selectors,
    check_taint,
    dicts,
    mapping,
    require_name,
)

_NODE_FIELDS = "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
_DEVICE_NODE_FIELDS = "`nodeName`, `nodeSelector`, or `allNodes`"


def _node_selection(spec: Mapping[str, Any], *, path: str, fail: Fail) -> list[str]:
    """Which node-selection fields are set, checking each one's own rule."""
    chosen: list[str] = []
    node_name = spec.get("nodeName")
    if node_name is not None:
        if node_name == "":
            raise fail(f"{path}.nodeName", "must be either unset or set to a non-empty string")
        require_name(node_name, names.dns1123_subdomain, path=f"{path}.nodeName", fail=fail)
        chosen.append("`nodeName`")
    selector = spec.get("nodeSelector")
    if selector is not None:
        chosen.append("`nodeSelector`")
    for name in ("allNodes", "perDeviceNodeSelection"):
        value = spec.get(name)
        if value is False:
            raise fail(f"{path}.{name}", "must be either unset or set to true")
        if value is True:
            chosen.append(f"`{name}`")
    return chosen


def _plain(value: Mapping[str, Any]) -> bool:
    """The common attribute shapes `_attribute` accepts, told apart at a glance."""
    if value.__class__ is not dict or len(value) != 1:
        return False
    ((key, entry),) = value.items()
    if key == "string":
        return entry.__class__ is str and len(entry) <= ATTRIBUTE_VALUE_MAX_LENGTH
    return (key == "int" or key == "bool") and entry is not None


def _attribute(value: Mapping[str, Any], *, path: str, fail: Fail) -> None:
    present = [key for key in VALUE_TYPES if value.get(key) is not None]
    if not present and any(entry is not None for entry in value.values()):
        return  # a value type newer than this code: kept as it is
    if len(present) != 1:
        got = ", ".join(present) if present else "none"
        raise fail(path, f"exactly one value must be specified, got {got}")
    key = present[0]
    entries = value[key] if isinstance(value[key], list) else [value[key]]
    if key in ("bools", "ints", "strings", "versions") and not entries:
        raise fail(f"{path}.{key}", "must not be empty if specified")
    for index, entry in enumerate(entries):
        where = f"{path}.{key}" if key in ("string", "version") else f"{path}.{key}[{index}]"
        too_long = isinstance(entry, str) and len(entry) > ATTRIBUTE_VALUE_MAX_LENGTH
        if key in ("string", "strings", "version", "versions") and too_long:
            raise fail(where, f"must be no more than {ATTRIBUTE_VALUE_MAX_LENGTH} characters")
        if key in ("version", "versions") and not SEMVER.match(entry):
            raise fail(where, f"{entry!r} must be a string compatible with semver.org spec 2.0.0")


def _counters(counters: Any, *, path: str, fail: Fail) -> None:
    if not counters:
        raise fail(path, "required field missing")
    at_most(counters, COUNTERS_PER_SET_MAX, path=path, fail=fail)
    for key in mapping(counters):
        reason = names.dns1123_label(key)
        if reason:
            raise fail(f"{path}[{key}]", f"invalid counter name {key!r}: {reason}")


def _device(
    device: Mapping[str, Any], *, path: str, fail: Fail, per_device_nodes: bool, v1: bool
) -> None:
    require_name(device.get("name"), names.dns1123_label, path=f"{path}.name", fail=fail)
    attributes = mapping(device.get("attributes"))
    capacity = mapping(device.get("capacity"))
    if len(attributes) + len(capacity) > ATTRIBUTES_AND_CAPACITIES_MAX:
        raise fail(
            path,
            "the total number of attributes and capacities must not exceed "
            f"{ATTRIBUTES_AND_CAPACITIES_MAX}, got {len(attributes) + len(capacity)}",
        )
    for field, entries in (("attributes", attributes), ("capacity", capacity)):
        for key, value in entries.items():
            reason = names.device_qualified_name(key)
            if reason:
                raise fail(f"{path}.{field}[{key}]", f"invalid name {key!r}: {reason}")
            # A dict first: isinstance against the Mapping ABC per attribute was a tenth of this.
            is_mapping = type(value) is dict or isinstance(value, Mapping)
            if field == "attributes" and is_mapping and not _plain(value):
                _attribute(value, path=f"{path}.attributes[{key}]", fail=fail)
            policy = value.get("requestPolicy") if is_mapping else None
            if (
                field == "capacity"
                and policy is not None
                and not device.get("allowMultipleAllocations")
            ):
                raise fail(
                    f"{path}.capacity[{key}].requestPolicy",
                    "allowMultipleAllocations must be true",
                )
    taints = device.get("taints")
    at_most(taints, DEVICE_TAINTS_MAX, path=f"{path}.taints", fail=fail)
    for index, taint in dicts(taints):
        check_taint(taint, path=f"{path}.taints[{index}]", fail=fail, effects=TAINT_EFFECTS)
    consumes = device.get("consumesCounters")
    if v1:
        at_most(consumes, COUNTER_CONSUMPTIONS_MAX, path=f"{path}.consumesCounters", fail=fail)
    seen: set[str] = set()
    for index, consumption in dicts(consumes):
        at = f"{path}.consumesCounters[{index}]"
        counter_set = consumption.get("counterSet")
        require_name(counter_set, names.dns1123_label, path=f"{at}.counterSet", fail=fail)
        if counter_set in seen:
            raise fail(f"{at}.counterSet", f"duplicate value {counter_set!r}")
        seen.add(str(counter_set))
        _counters(consumption.get("counters"), path=f"{at}.counters", fail=fail)
    chosen = _node_selection(device, path=path, fail=fail)
    chosen = [c for c in chosen if c != "`perDeviceNodeSelection`"]
    if per_device_nodes and len(chosen) != 1:
        reason = "is required" if not chosen else "is required, but multiple fields are set"
        raise fail(
            path,
            f"exactly one of {_DEVICE_NODE_FIELDS} {reason} when `perDeviceNodeSelection` is "
            "set to true in the ResourceSlice spec",
        )
    if not per_device_nodes and chosen:
        raise fail(
            path,
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )


def validate_slice(spec: Any, *, fail: Fail, v1: bool) -> None:
    """A ResourceSlice's spec, v1 shape; `v1` adds the rules only v1 has."""
    spec = mapping(spec)
    require_name(spec.get("driver"), names.driver_name, path="spec.driver", fail=fail)
    pool = mapping(spec.get("pool"))
    require_name(pool.get("name"), names.pool_name, path="spec.pool.name", fail=fail)
    count = pool.get("resourceSliceCount")
    if isinstance(count, int) and count <= 0:
        raise fail("spec.pool.resourceSliceCount", f"must be greater than zero, got {count}")
    generation = pool.get("generation")
    if isinstance(generation, int) and generation < 0:
        raise fail(
            "spec.pool.generation", f"must be greater than or equal to zero, got {generation}"
        )
    chosen = _node_selection(spec, path="spec", fail=fail)
    if not chosen:
        raise fail("spec", f"exactly one of {_NODE_FIELDS} is required")
    if len(chosen) > 1:
        raise fail(
            "spec",
            f"exactly one of {_NODE_FIELDS} is required, but multiple fields are set: "
            + ", ".join(chosen),
        )
    selector = mapping(spec.get("nodeSelector"))
    if selector and len(selector.get("nodeSelectorTerms") or []) != 1:
        raise fail(
            "spec.nodeSelector.nodeSelectorTerms", "must have exactly one node selector term"
        )
    devices = spec.get("devices")
    counter_sets = spec.get("sharedCounters")
    # Since 1.34 counter sets live in slices of their own; 1.33's betas allowed both in one.
    if v1 and devices is not None and counter_sets is not None:
        raise fail("spec", "only one of `sharedCounters` or `devices` is allowed")
    indexed = dicts(devices)
    advanced = any(
        d.get("taints")
        or d.get("consumesCounters")
        or any(
            (type(a) is dict or isinstance(a, Mapping))
            and any(a.get(k) is not None for k in VALUE_TYPES[4:])
            for a in mapping(d.get("attributes")).values()
        )
        for _, d in indexed
    )
    limit = SLICE_MAX_DEVICES_ADVANCED if advanced else SLICE_MAX_DEVICES
    at_most(devices, limit, path="spec.devices", fail=fail)
    per_device_nodes = spec.get("perDeviceNodeSelection") is True
    for index, device in indexed:
        _device(
            device,
            path=f"spec.devices[{index}]",
            fail=fail,
            per_device_nodes=per_device_nodes,
            v1=v1,
        )
    if v1:
        at_most(counter_sets, COUNTER_SETS_MAX, path="spec.sharedCounters", fail=fail)
    for index, counter_set in dicts(counter_sets):
        at = f"spec.sharedCounters[{index}]"
        require_name(counter_set.get("name"), names.dns1123_label, path=f"{at}.name", fail=fail)
        _counters(counter_set.get("counters"), path=f"{at}.counters", fail=fail)


def validate_taint_rule(spec: Any, *, fail: Fail) -> None:
    """A DeviceTaintRule's selector names and taint."""
    spec = mapping(spec)
    selector = mapping(spec.get("deviceSelector"))
    checks = (
        ("deviceClassName", names.dns1123_subdomain),
        ("driver", names.driver_name),
        ("pool", names.pool_name),
        ("device", names.dns1123_label),
    )
    for name, check in checks:
        if selector.get(name) is not None:
            require_name(selector[name], check, path=f"spec.deviceSelector.{name}", fail=fail)
    check_selectors(selector.get("selectors"), path="spec.deviceSelector.selectors", fail=fail)
    taint = spec.get("taint")
    if isinstance(taint, Mapping):
        check_taint(taint, path="spec.taint", fail=fail, effects=TAINT_EFFECTS)
