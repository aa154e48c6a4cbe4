"""Device taints and request tolerations (upstream taintPreventsAllocation, ToleratesTaint)."""

from __future__ import annotations

from dralib.allocator.requests import RequestView
from dralib.allocator.slices import DeviceInfo
from dralib.allocator.types import JSON

__all__ = ["taint_prevents_allocation", "tolerates"]

# Only these effects keep a device from being allocated; others (None, unknown) are ignored.
_BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def taint_prevents_allocation(device: DeviceInfo, request: RequestView) -> bool:
    """True if a NoSchedule/NoExecute taint of the device is not tolerated by the request."""
    for taint in device.taints:
        if taint.get("effect") in _BLOCKING_TAINT_EFFECTS and not any(
            tolerates(toleration, taint) for toleration in request.tolerations
        ):
            return True
    return False


def tolerates(toleration: JSON, taint: JSON) -> bool:
    """Upstream resourceclaim.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"
