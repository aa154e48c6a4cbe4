"""The API server's validation of what the dashboard and the allocator read.

Written from k8s.io/kubernetes pkg/apis/resource/validation and apimachinery's ObjectMeta and
name-format checks. It runs on the v1 shape `normalize` produced; the `fail` it gets translates
v1 paths back into the served version's (`requests[0].exactly.count` is `requests[0].count` in
v1beta1, `devices[0].attributes` is `devices[0].basic.attributes`), so a message names the
field as the user wrote it. Unlike the API server, the first error wins.

Rules tied to one API version: `sharedCounters` and `devices` exclude each other, and the
counter limits of 1.34's partitionable devices apply, in v1 only (1.33's betas allowed both).
Objects converted from classic v1alpha2, and core kinds, get the ObjectMeta checks (and Pods
their claim references); classic DRA fields are driver-defined. CEL selectors are compiled with
the allocator's CEL adapter, so an expression it cannot run is refused up front.

Only `normalize(..., validate=True)` runs these: for what users write or import, not for what
the API server sends (it does not re-validate stored objects either).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from dralib.allocator.cel import MAX_EXPRESSION_LENGTH, CELError, CELOptions, compile_selector

from . import names

Fail = Callable[[str, str], Exception]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
DEVICE_REQUESTS_MAX = 32  # resource.DeviceRequestsMaxSize
FIRST_AVAILABLE_MAX = 8  # resource.FirstAvailableDeviceRequestMaxSize
DEVICE_SELECTORS_MAX = 32  # resource.DeviceSelectorsMaxSize
DEVICE_CONSTRAINTS_MAX = 32  # resource.DeviceConstraintsMaxSize
DEVICE_CONFIG_MAX = 32  # resource.DeviceConfigMaxSize
SLICE_MAX_DEVICES = 128  # resource.ResourceSliceMaxDevices
# resource.ResourceSliceMaxDevicesWithAdvancedFeatures: taints, consumesCounters, list attributes.
SLICE_MAX_DEVICES_ADVANCED = 64
ATTRIBUTES_AND_CAPACITIES_MAX = 32  # resource.ResourceSliceMaxAttributesAndCapacitiesPerDevice
ATTRIBUTE_VALUE_MAX_LENGTH = 64  # resource.DeviceAttributeMaxValueLength
DEVICE_TAINTS_MAX = 4  # resource.DeviceTaintsMaxLength
COUNTER_SETS_MAX = 8  # resource.ResourceSliceMaxCounterSets (v1)
COUNTERS_PER_SET_MAX = 32  # resource.ResourceSliceMaxCountersPerCounterSet
COUNTER_CONSUMPTIONS_MAX = 2  # resource.ResourceSliceMaxDeviceCounterConsumptionsPerDevice
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024  # resource.OpaqueParametersMaxLength

TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
NODE_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
ALLOCATION_MODES = ("ExactCount", "All")
VALUE_TYPES = ("bool", "int", "string", "version", "bools", "ints", "strings", "versions")
_LIST_VALUE_TYPES = ("bools", "ints", "strings", "versions")
_CLASSIC_CLAIM_FIELDS = ("resourceClassName", "parametersRef")
_SEMVER_ID = r"(0|[1-9]\d*)"
_SEMVER_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"


def _semver_pattern() -> re.Pattern[str]:
    pre = rf"(-{_SEMVER_PRE}(\.{_SEMVER_PRE})*)?"
    build = r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
    return re.compile(rf"^{_SEMVER_ID}\.{_SEMVER_ID}\.{_SEMVER_ID}{pre}{build}$")


SEMVER = _semver_pattern()


def dicts(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return (
        [(i, v) for i, v in enumerate(value) if isinstance(v, dict)]
        if isinstance(value, list)
        else []
    )


def mapping(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def at_most(items: Any, limit: int, *, path: str, fail: Fail) -> None:
    if isinstance(items, list | dict) and len(items) > limit:
        raise fail(path, f"must have at most {limit} items, got {len(items)}")


def require_name(value: Any, check: Callable[[str], str], *, path: str, fail: Fail) -> None:
    if not isinstance(value, str) or value == "":
        raise fail(path, "required field missing")
    reason = check(value)
    if reason:
        raise fail(path, f"invalid value {value!r}: {reason}")


def validate_metadata(meta: Mapping[str, Any], *, path: str, fail: Fail, named: bool) -> None:
    """ObjectMeta: name and namespace formats, label keys and values, annotation size."""
    if named:
        require_name(meta.get("name"), names.dns1123_subdomain, path=f"{path}.name", fail=fail)
    namespace = meta.get("namespace")
    if namespace:
        require_name(namespace, names.dns1123_label, path=f"{path}.namespace", fail=fail)
    for key, value in mapping(meta.get("labels")).items():
        where = f"{path}.labels[{key}]"
        reason = names.qualified_name(key)
        if reason:
            raise fail(where, f"invalid label key {key!r}: {reason}")
        reason = names.label_value(value)
        if reason:
            raise fail(where, f"invalid label value {value!r}: {reason}")
    total = 0
    for key, value in mapping(meta.get("annotations")).items():
        reason = names.qualified_name(key.lower())
        if reason:
            raise fail(f"{path}.annotations[{key}]", f"invalid annotation key {key!r}: {reason}")
        total += len(key.encode()) + len(str(value).encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        raise fail(
            f"{path}.annotations",
            f"may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes in total, got {total}",
        )


def check_cel(expression: Any, *, path: str, fail: Fail) -> None:
    """Compile a CEL selector as the API server would on create."""
    if not isinstance(expression, str) or not expression.strip():
        raise fail(path, "required field missing")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise fail(
            path, f"is {len(expression)} characters long, the limit is {MAX_EXPRESSION_LENGTH}"
        )
    try:
        compile_selector(expression, options=CELOptions())
    except CELError as exc:
        raise fail(path, str(exc)) from exc
    except RecursionError as exc:
        raise fail(path, "expression is nested too deeply") from exc


def check_selectors(selectors: Any, *, path: str, fail: Fail) -> None:
    at_most(selectors, DEVICE_SELECTORS_MAX, path=path, fail=fail)
    for index, selector in dicts(selectors):
        cel = selector.get("cel")
        if not isinstance(cel, Mapping):
            raise fail(f"{path}[{index}].cel", "required field missing")
        check_cel(cel.get("expression"), path=f"{path}[{index}].cel.expression", fail=fail)


def _opaque(config: Mapping[str, Any], *, path: str, fail: Fail) -> None:
    opaque = config.get("opaque")
    if not isinstance(opaque, Mapping):
        raise fail(f"{path}.opaque", "required field missing")
    require_name(opaque.get("driver"), names.driver_name, path=f"{path}.opaque.driver", fail=fail)
    parameters = opaque.get("parameters")
    if parameters is None:
        raise fail(f"{path}.opaque.parameters", "required field missing")
    if not isinstance(parameters, Mapping):
        raise fail(f"{path}.opaque.parameters", "must be a valid JSON object")
    size = len(json.dumps(parameters, separators=(",", ":")).encode())
    if size > OPAQUE_PARAMETERS_MAX_LENGTH:
        raise fail(
            f"{path}.opaque.parameters",
            f"may not be more than {OPAQUE_PARAMETERS_MAX_LENGTH} bytes, got {size}",
        )


def check_taint(
    taint: Mapping[str, Any], *, path: str, fail: Fail, effects: tuple[str, ...]
) -> None:
    require_name(taint.get("key"), names.qualified_name, path=f"{path}.key", fail=fail)
    value = taint.get("value")
    if isinstance(value, str) and names.label_value(value):
        raise fail(f"{path}.value", f"invalid value {value!r}: {names.label_value(value)}")
    effect = taint.get("effect")
    if not effect:
        raise fail(f"{path}.effect", "required field missing")
    if effect not in effects:
        raise fail(
            f"{path}.effect",
            f"unsupported value {effect!r}: supported values: " + ", ".join(effects),
        )


def _tolerations(tolerations: Any, *, path: str, fail: Fail) -> None:
    for index, toleration in dicts(tolerations):
        where = f"{path}[{index}]"
        key = toleration.get("key")
        if key:
            require_name(key, names.qualified_name, path=f"{where}.key", fail=fail)
        operator = toleration.get("operator") or "Equal"
        value = toleration.get("value") or ""
        if operator not in TOLERATION_OPERATORS:
            raise fail(
                f"{where}.operator",
                f"unsupported value {operator!r}: supported values: Equal, Exists",
            )
        if operator == "Exists" and value:
            raise fail(f"{where}.value", "must be empty for operator `Exists`")
        if names.label_value(value):
            raise fail(f"{where}.value", f"invalid value {value!r}: {names.label_value(value)}")
        effect = toleration.get("effect")
        if effect and effect not in TAINT_EFFECTS:
            raise fail(
                f"{where}.effect",
                f"unsupported value {effect!r}: supported values: " + ", ".join(TAINT_EFFECTS),
            )


def _exact(request: Mapping[str, Any], *, path: str, fail: Fail) -> None:
    """The fields of `exactly` and of a subrequest: class, selectors, mode and count."""
    require_name(
        request.get("deviceClassName"),
        names.dns1123_subdomain,
        path=f"{path}.deviceClassName",
        fail=fail,
    )
    check_selectors(request.get("selectors"), path=f"{path}.selectors", fail=fail)
    # The API server defaults an empty mode to ExactCount and a missing count to 1.
    mode = request.get("allocationMode") or "ExactCount"
    count = request.get("count")
    if mode not in ALLOCATION_MODES:
        raise fail(
            f"{path}.allocationMode",
            f"unsupported value {mode!r}: supported values: " + ", ".join(ALLOCATION_MODES),
        )
    if mode == "All" and count not in (None, 0):
        raise fail(
            f"{path}.count", f"must not be specified when allocationMode is 'All', got {count}"
        )
    if mode == "ExactCount" and isinstance(count, int) and count <= 0:
        raise fail(f"{path}.count", f"must be greater than zero, got {count}")
    _tolerations(request.get("tolerations"), path=f"{path}.tolerations", fail=fail)


def _request_names(requests: list[tuple[int, dict[str, Any]]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for _, request in requests:
        subs = {str(s.get("name")) for _, s in dicts(request.get("firstAvailable"))}
        found[str(request.get("name"))] = subs
    return found


def _request_refs(refs: Any, known: dict[str, set[str]], *, path: str, fail: Fail) -> None:
    at_most(refs, DEVICE_REQUESTS_MAX, path=path, fail=fail)
    seen: set[str] = set()
    for index, ref in enumerate(refs if isinstance(refs, list) else []):
        where = f"{path}[{index}]"
        parts = str(ref).split("/")
        resolved = len(parts) <= 2 and parts[0] in known
        if resolved and len(parts) == 2:
            resolved = parts[1] in known[parts[0]]
        if not resolved:
            raise fail(
                where,
                f"{ref!r} must be the name of a request in the claim or the name of a request "
                "and a subrequest separated by '/'",
            )
        if ref in seen:
            raise fail(where, f"duplicate value {ref!r}")
        seen.add(str(ref))


def validate_claim_spec(spec: Any, *, path: str, fail: Fail, inline: bool) -> None:
    """A ResourceClaim's spec (or a template's spec.spec), v1 shape."""
    if not isinstance(spec, Mapping):
        return
    for name in _CLASSIC_CLAIM_FIELDS:
        if name in spec:
            raise fail(
                f"{path}.{name}",
                f"{name} belongs to classic DRA (resource.k8s.io/v1alpha2); this version asks "
                "for devices under devices.requests",
            )
    devices = mapping(spec.get("devices"))
    requests = devices.get("requests")
    where = f"{path}.devices.requests"
    at_most(requests, DEVICE_REQUESTS_MAX, path=where, fail=fail)
    indexed = dicts(requests)
    # v1beta1 and v1alpha3 write the `exactly` fields inline: name them as the user wrote them.
    exact_name = "`deviceClassName`" if inline else "`exactly`"
    for index, request in indexed:
        at = f"{where}[{index}]"
        require_name(request.get("name"), names.dns1123_label, path=f"{at}.name", fail=fail)
        exactly = request.get("exactly")
        subrequests = request.get("firstAvailable")
        if exactly is not None and subrequests:
            raise fail(
                at,
                f"exactly one of {exact_name} or `firstAvailable` is required, but multiple "
                "fields are set",
            )
        if exactly is None and not subrequests:
            raise fail(at, f"exactly one of {exact_name} or `firstAvailable` is required")
        if isinstance(exactly, Mapping):
            _exact(exactly, path=f"{at}.exactly", fail=fail)
            continue
        at_most(subrequests, FIRST_AVAILABLE_MAX, path=f"{at}.firstAvailable", fail=fail)
        for sub_index, sub in dicts(subrequests):
            sub_at = f"{at}.firstAvailable[{sub_index}]"
            require_name(sub.get("name"), names.dns1123_label, path=f"{sub_at}.name", fail=fail)
            _exact(sub, path=sub_at, fail=fail)
    known = _request_names(indexed)
    constraints = devices.get("constraints")
    at_most(constraints, DEVICE_CONSTRAINTS_MAX, path=f"{path}.devices.constraints", fail=fail)
    for index, constraint in dicts(constraints):
        at = f"{path}.devices.constraints[{index}]"
        _request_refs(constraint.get("requests"), known, path=f"{at}.requests", fail=fail)
        for name in ("matchAttribute", "distinctAttribute"):
            value = constraint.get(name)
            if value is not None:
                require_name(value, names.fully_qualified_name, path=f"{at}.{name}", fail=fail)
                break
        else:
            raise fail(at, "exactly one of `matchAttribute` or `distinctAttribute` is required")
    configs = devices.get("config")
    at_most(configs, DEVICE_CONFIG_MAX, path=f"{path}.devices.config", fail=fail)
    for index, config in dicts(configs):
        at = f"{path}.devices.config[{index}]"
        _request_refs(config.get("requests"), known, path=f"{at}.requests", fail=fail)
        _opaque(config, path=at, fail=fail)


def validate_device_class(spec: Any, *, fail: Fail) -> None:
    """A DeviceClass's selectors (compiled) and config."""
    spec = mapping(spec)
    check_selectors(spec.get("selectors"), path="spec.selectors", fail=fail)
    configs = spec.get("config")
    at_most(configs, DEVICE_CONFIG_MAX, path="spec.config", fail=fail)
    for index, config in dicts(configs):
        _opaque(config, path=f"spec.config[{index}]", fail=fail)
