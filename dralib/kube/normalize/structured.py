"""Conversions between the structured-parameters versions (v1alpha3, v1beta1, v1beta2) and v1.

They work on objects already checked against their version's shape, mutating a private copy.
Mapping rules follow upstream's conversion code: a v1beta1 request gets `exactly` only when one of
its inline request fields is set, and `basic` device fields move up one level unchanged.
"""

from __future__ import annotations

from typing import Any

from .shapes import EXACT_FIELD_NAMES

# Fields of 1.31's control-plane-controller mode (driver allocates); v1 has no place for them.
ALPHA_CLASSIC_FIELDS = (
    "controller",
    "allocationController",
    "deallocationRequested",
    "suitableNodes",
)


def _is_set(name: str, value: Any) -> bool:
    """Whether an inline request field carries a value (Go's zero values count as unset)."""
    if name in ("deviceClassName", "allocationMode"):
        return bool(value)
    if name == "count":
        return value not in (0, None)
    return value is not None


def request_inline_to_exactly(request: dict[str, Any]) -> None:
    """Move a v1beta1/v1alpha3 request's inline fields under `exactly`."""
    inline = {name: request.pop(name) for name in EXACT_FIELD_NAMES if name in request}
    if any(_is_set(name, value) for name, value in inline.items()):
        request["exactly"] = inline


def request_exactly_to_inline(request: dict[str, Any]) -> None:
    """Move a v1 request's `exactly` fields inline, as v1beta1 and v1alpha3 serve them."""
    exactly = request.pop("exactly", None)
    if exactly:
        request.update(exactly)
    else:
        # deviceClassName has no omitempty in those versions, so the server always sends it.
        request["deviceClassName"] = ""


def _requests(claim_spec: Any) -> list[dict[str, Any]]:
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    return list(requests) if isinstance(requests, list) else []


def _claim_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The claim spec(s) inside a ResourceClaim or ResourceClaimTemplate."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if obj.get("kind") == "ResourceClaimTemplate":
        inner = spec.get("spec")
        return [inner] if isinstance(inner, dict) else []
    return [spec] if obj.get("kind") == "ResourceClaim" else []


def _devices(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    return list(devices) if isinstance(devices, list) else []


def devices_from_basic(obj: dict[str, Any], *, plain_capacity: bool) -> None:
    """Flatten `basic` into each device of a slice; v1alpha3 capacity becomes `{value: q}`."""
    for device in _devices(obj):
        basic = device.pop("basic", None) or {}
        if plain_capacity and isinstance(basic.get("capacity"), dict):
            basic["capacity"] = {key: {"value": q} for key, q in basic["capacity"].items()}
        for key, value in basic.items():
            # A field set both inline and in `basic` is not something a server sends; keep inline.
            device.setdefault(key, value)


def devices_to_basic(obj: dict[str, Any], *, plain_capacity: bool) -> None:
    """Nest every device field except the name under `basic`, as v1beta1 and v1alpha3 serve it."""
    for device in _devices(obj):
        basic = {key: device.pop(key) for key in list(device) if key != "name"}
        if plain_capacity and isinstance(basic.get("capacity"), dict):
            # v1alpha3 capacity is a bare quantity: requestPolicy has nowhere to go.
            basic["capacity"] = {key: cap["value"] for key, cap in basic["capacity"].items()}
        device["basic"] = basic


def claims_to_exactly(obj: dict[str, Any]) -> None:
    """Apply `request_inline_to_exactly` to every request of a claim or template."""
    for spec in _claim_specs(obj):
        for request in _requests(spec):
            request_inline_to_exactly(request)


def claims_to_inline(obj: dict[str, Any]) -> None:
    """Apply `request_exactly_to_inline` to every request of a claim or template."""
    for spec in _claim_specs(obj):
        for request in _requests(spec):
            request_exactly_to_inline(request)


def lift_alpha_classic(obj: dict[str, Any]) -> None:
    """Move 1.31 v1alpha3 controller-mode fields into the top-level `classic` mapping."""
    classic: dict[str, Any] = {}
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind == "DeviceClass" and isinstance(spec, dict):
        suitable = spec.pop("suitableNodes", None)
        if suitable is not None:
            classic["suitableNodes"] = suitable
    for claim_spec in _claim_specs(obj):
        controller = claim_spec.pop("controller", None)
        if controller:
            classic["controller"] = controller
    status = obj.get("status")
    if kind == "ResourceClaim" and isinstance(status, dict):
        if status.pop("deallocationRequested", None):
            classic["deallocationRequested"] = True
        allocation = status.get("allocation")
        if isinstance(allocation, dict):
            controller = allocation.pop("controller", None)
            if controller:
                classic["allocationController"] = controller
    if classic:
        obj["classic"] = classic


def lower_alpha_classic(obj: dict[str, Any]) -> None:
    """Reverse `lift_alpha_classic`, for serving a v1 object as v1alpha3."""
    classic = obj.pop("classic", None)
    if not classic:
        return
    spec = obj.setdefault("spec", {})
    if "suitableNodes" in classic:
        spec["suitableNodes"] = classic["suitableNodes"]
    if "controller" in classic:
        for claim_spec in _claim_specs(obj):
            claim_spec["controller"] = classic["controller"]
    if "deallocationRequested" in classic:
        obj.setdefault("status", {})["deallocationRequested"] = classic["deallocationRequested"]
    if "allocationController" in classic:
        status = obj.setdefault("status", {})
        status.setdefault("allocation", {})["controller"] = classic["allocationController"]


def tidy(obj: dict[str, Any]) -> None:
    """Drop the `adminAccess: null` of allocation results, which v1 never sends.

    1.32 and 1.33 declared that pointer without omitempty in every version they served.
    """
    status = obj.get("status") if obj.get("kind") == "ResourceClaim" else None
    allocation = status.get("allocation") if isinstance(status, dict) else None
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    for result in results or []:
        if "adminAccess" in result and result["adminAccess"] is None:
            del result["adminAccess"]


def drop_zero_slice_fields(obj: dict[str, Any]) -> None:
    """v1beta1 and v1alpha3 slices have non-pointer nodeName/allNodes; v1 leaves zero values out."""
    spec = obj.get("spec") if obj.get("kind") == "ResourceSlice" else None
    if isinstance(spec, dict):
        if spec.get("nodeName") == "":
            del spec["nodeName"]
        if spec.get("allNodes") is False:
            del spec["allNodes"]


def v1beta1_to_v1(obj: dict[str, Any]) -> None:
    """Rewrite a checked v1beta1 object in place into the v1 shape."""
    tidy(obj)
    drop_zero_slice_fields(obj)
    devices_from_basic(obj, plain_capacity=False)
    claims_to_exactly(obj)


def v1alpha3_to_v1(obj: dict[str, Any]) -> None:
    """Rewrite a checked v1alpha3 object in place into the v1 shape."""
    tidy(obj)
    drop_zero_slice_fields(obj)
    devices_from_basic(obj, plain_capacity=True)
    claims_to_exactly(obj)
    lift_alpha_classic(obj)


def v1_to_v1beta1(obj: dict[str, Any]) -> None:
    """Rewrite a v1 object in place into the v1beta1 shape."""
    devices_to_basic(obj, plain_capacity=False)
    claims_to_inline(obj)


def v1_to_v1alpha3(obj: dict[str, Any]) -> None:
    """Rewrite a v1 object in place into the v1alpha3 shape."""
    devices_to_basic(obj, plain_capacity=True)
    claims_to_inline(obj)
    lower_alpha_classic(obj)
