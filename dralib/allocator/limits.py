"""Upstream API limits (k8s.io/api resource/v1) and checks of raw input against them.

The API server rejects objects over these limits, so upstream's allocator never sees them; this
port also reads hand-written files (`python -m claims.allocator`, what-if input), and the search
costs grow with every request, alternative and device. So the allocator refuses such input with
the message the API server's validation would give (`field.TooMany`, `field.TooLong`), naming
the object and field. Claims, classes and slice-wide limits are checked when the object is read;
a device's own limits when the allocator first reads that device (before its attributes reach
CEL), so allocators that parse thousands of slices do not pay for devices they never look at.
The constants carry upstream's names in upper case, for the normalizer and anything else that
needs them.
"""

from __future__ import annotations

from typing import Any

from dralib.allocator.types import ScenarioError

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "BINDING_CONDITIONS_MAX_SIZE",
    "BINDING_FAILURE_CONDITIONS_MAX_SIZE",
    "CEL_SELECTOR_EXPRESSION_MAX_COST",
    "CEL_SELECTOR_EXPRESSION_MAX_LENGTH",
    "DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH",
    "DEVICE_CONFIG_MAX_SIZE",
    "DEVICE_CONSTRAINTS_MAX_SIZE",
    "DEVICE_MAX_DOMAIN_LENGTH",
    "DEVICE_MAX_ID_LENGTH",
    "DEVICE_REQUESTS_MAX_SIZE",
    "DEVICE_SELECTORS_MAX_SIZE",
    "DEVICE_TAINTS_MAX_LENGTH",
    "DEVICE_TOLERATIONS_MAX_LENGTH",
    "DRIVER_NAME_MAX_LENGTH",
    "FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE",
    "OPAQUE_PARAMETERS_MAX_LENGTH",
    "POOL_NAME_MAX_LENGTH",
    "RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE",
    "RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE",
    "RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE",
    "RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET",
    "RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION",
    "RESOURCE_SLICE_MAX_COUNTER_SETS",
    "RESOURCE_SLICE_MAX_DEVICES",
    "RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES",
    "RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE",
    "check_claim",
    "check_device_class",
    "check_slice",
]

# ResourceClaim (DeviceClaim, DeviceRequest, DeviceSubRequest, ExactDeviceRequest).
ALLOCATION_RESULTS_MAX_SIZE = 32
DEVICE_REQUESTS_MAX_SIZE = ALLOCATION_RESULTS_MAX_SIZE
DEVICE_CONSTRAINTS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
DEVICE_SELECTORS_MAX_SIZE = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
DEVICE_TOLERATIONS_MAX_LENGTH = 16
RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE = 256
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024

# CEL selectors (claims and classes). The cost limit applies to the compiler's estimate.
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000

# ResourceSlice and Device.
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
RESOURCE_SLICE_MAX_DEVICES = 128
# When any device of the slice has taints, consumes counters or has list-type attributes.
RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
RESOURCE_SLICE_MAX_COUNTER_SETS = 8
RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET = 32
RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE = 2
RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION = 32
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32
RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE = 48
DEVICE_TAINTS_MAX_LENGTH = 16
BINDING_CONDITIONS_MAX_SIZE = 4
BINDING_FAILURE_CONDITIONS_MAX_SIZE = 4
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32

_LIST_ATTRIBUTE_FIELDS = ("ints", "bools", "strings", "versions")
_SCALAR_ATTRIBUTE_FIELDS = frozenset(("int", "bool", "string", "version"))
_NO_FIELDS: dict[str, Any] = {}
# Device fields without a limit of their own; a device with others takes the longer check.
_COMMON_DEVICE_FIELDS = frozenset(
    (
        "name",
        "attributes",
        "capacity",
        "nodeName",
        "nodeSelector",
        "allNodes",
        "allowMultipleAllocations",
        "bindsToNode",
    )
)


def _too_many(where: str, path: str, items: Any, limit: int) -> None:
    # A path starting with "." continues `where` (a device's own location).
    if isinstance(items, (list, dict)) and len(items) > limit:
        field = f"{where}{path}" if path.startswith(".") else f"{where}: {path}"
        raise ScenarioError(f"{field}: Too many: {len(items)}: must have at most {limit} items")


def _selectors(where: str, path: str, selectors: Any) -> None:
    _too_many(where, path, selectors, DEVICE_SELECTORS_MAX_SIZE)
    if not isinstance(selectors, list):
        return
    for index, selector in enumerate(selectors):
        cel = selector.get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if isinstance(expression, str) and len(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            raise ScenarioError(
                f"{where}: {path}[{index}].cel.expression: Too long: may not be more than "
                f"{CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes"
            )


def _request(where: str, path: str, request: Any) -> None:
    if not isinstance(request, dict):
        return
    _selectors(where, f"{path}.selectors", request.get("selectors"))
    _too_many(
        where, f"{path}.tolerations", request.get("tolerations"), DEVICE_TOLERATIONS_MAX_LENGTH
    )


def check_claim(devices: Any, *, where: str) -> None:
    """Raise ScenarioError if a claim's `spec.devices` is over an API limit."""
    if not isinstance(devices, dict):
        return
    path = "spec.devices"
    requests = devices.get("requests")
    _too_many(where, f"{path}.requests", requests, DEVICE_REQUESTS_MAX_SIZE)
    for index, request in enumerate(requests if isinstance(requests, list) else ()):
        if not isinstance(request, dict):
            continue
        r_path = f"{path}.requests[{index}]"
        _request(where, f"{r_path}.exactly", request.get("exactly"))
        subrequests = request.get("firstAvailable")
        _too_many(
            where, f"{r_path}.firstAvailable", subrequests, FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE
        )
        for s_index, sub in enumerate(subrequests if isinstance(subrequests, list) else ()):
            _request(where, f"{r_path}.firstAvailable[{s_index}]", sub)
    for field_name, limit in (
        ("constraints", DEVICE_CONSTRAINTS_MAX_SIZE),
        ("config", DEVICE_CONFIG_MAX_SIZE),
    ):
        entries = devices.get(field_name)
        _too_many(where, f"{path}.{field_name}", entries, limit)
        for index, entry in enumerate(entries if isinstance(entries, list) else ()):
            if isinstance(entry, dict):
                _too_many(
                    where,
                    f"{path}.{field_name}[{index}].requests",
                    entry.get("requests"),
                    DEVICE_REQUESTS_MAX_SIZE,
                )


def check_device_class(spec: Any, *, where: str) -> None:
    """Raise ScenarioError if a DeviceClass spec is over an API limit."""
    if not isinstance(spec, dict):
        return
    _selectors(where, "spec.selectors", spec.get("selectors"))
    _too_many(where, "spec.config", spec.get("config"), DEVICE_CONFIG_MAX_SIZE)


def _attribute_values(attributes: dict[str, Any]) -> tuple[int, bool]:
    """How many values the attributes hold, and whether any is a list."""
    values = 0
    lists = False
    for attribute in attributes.values():
        values += 1
        if isinstance(attribute, dict) and not attribute.keys() <= _SCALAR_ATTRIBUTE_FIELDS:
            for list_field in _LIST_ATTRIBUTE_FIELDS:
                items = attribute.get(list_field)
                if isinstance(items, list):
                    lists = True
                    values += len(items) - 1
    return values, lists


def _device_extras(device_where: str, device: dict[str, Any]) -> bool:
    """Limits on the less common device fields; True if they lower the slice's device limit."""
    taints = device.get("taints")
    _too_many(device_where, ".taints", taints, DEVICE_TAINTS_MAX_LENGTH)
    consumes = device.get("consumesCounters")
    _too_many(
        device_where,
        ".consumesCounters",
        consumes,
        RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE,
    )
    for index, entry in enumerate(consumes if isinstance(consumes, list) else ()):
        if isinstance(entry, dict):
            _too_many(
                device_where,
                f".consumesCounters[{index}].counters",
                entry.get("counters"),
                RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION,
            )
    _too_many(
        device_where,
        ".bindingConditions",
        device.get("bindingConditions"),
        BINDING_CONDITIONS_MAX_SIZE,
    )
    _too_many(
        device_where,
        ".bindingFailureConditions",
        device.get("bindingFailureConditions"),
        BINDING_FAILURE_CONDITIONS_MAX_SIZE,
    )
    return bool(taints) or bool(consumes)


def check_device(device: dict[str, Any], *, where: str) -> bool:
    """Raise ScenarioError if one device is over an API limit; `where` names the device.

    Returns whether the device uses a feature that lowers its slice's device limit (taints,
    counters, list-type attributes).
    """
    # Runs for every device an allocator reads, so the common device (a few scalar attributes
    # and capacities, no other limited field) takes a few lookups.
    attributes = device.get("attributes")
    capacity = device.get("capacity")
    if attributes.__class__ is not dict:
        attributes = _NO_FIELDS
    count = len(attributes) + (len(capacity) if capacity.__class__ is dict else 0)
    if count > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        raise ScenarioError(
            f"{where}: Invalid value: {count}: the total number of attributes and capacities "
            f"must not exceed {RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}"
        )
    lists = False
    scalars = True
    for attribute in attributes.values():
        if attribute.__class__ is not dict or not _SCALAR_ATTRIBUTE_FIELDS.issuperset(
            attribute.keys()
        ):
            scalars = False
            break
    # Scalars hold one value each and there are at most 32 of them: only lists can exceed 48.
    if not scalars:
        values, lists = _attribute_values(attributes)
        if values > RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE:
            raise ScenarioError(
                f"{where}.attributes: Too many: {values}: must have at most "
                f"{RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE} attribute values"
            )
    if _COMMON_DEVICE_FIELDS.issuperset(device.keys()):
        return lists
    return _device_extras(where, device) or lists


def check_slice(spec: dict[str, Any], *, where: str) -> None:
    """Raise ScenarioError if a ResourceSlice spec is over a slice-wide API limit.

    Every slice of every allocator passes here, so per-device limits wait for `check_device`,
    which runs when the allocator first reads a device, except where the slice holds more
    devices than a slice with taints, counters or list attributes may.
    """
    devices = spec.get("devices")
    if isinstance(devices, list):
        _too_many(where, "spec.devices", devices, RESOURCE_SLICE_MAX_DEVICES)
        if len(devices) > RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES:
            advanced = False
            for index, device in enumerate(devices):
                if isinstance(device, dict):
                    path = f"{where}: spec.devices[{index}]"
                    advanced = check_device(device, where=path) or advanced
            if advanced:
                _too_many(
                    where,
                    "spec.devices",
                    devices,
                    RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES,
                )
    counter_sets = spec.get("sharedCounters")
    _too_many(where, "spec.sharedCounters", counter_sets, RESOURCE_SLICE_MAX_COUNTER_SETS)
    for index, counter_set in enumerate(counter_sets if isinstance(counter_sets, list) else ()):
        if isinstance(counter_set, dict):
            _too_many(
                where,
                f"spec.sharedCounters[{index}].counters",
                counter_set.get("counters"),
                RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
            )
