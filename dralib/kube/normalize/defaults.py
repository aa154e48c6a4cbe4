"""The API server's defaults for claim requests, applied to objects in the v1 shape.

Upstream's SetDefaults_ExactDeviceRequest and SetDefaults_DeviceSubRequest run before validation
and storage: an empty allocationMode becomes ExactCount, and an ExactCount request with count 0
(or none) asks for one device. Objects read from a cluster already carry them; objects written
by hand (what-if input, snapshot files) get them here, so the allocator, which like upstream's
refuses an empty mode, sees what the API server would have stored.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply_request_defaults"]

_CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def _default_request(request: Any) -> None:
    if not isinstance(request, dict):
        return
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1


def apply_request_defaults(obj: dict[str, Any]) -> None:
    """Default every `exactly` request and `firstAvailable` subrequest of a claim or template."""
    if obj.get("kind") not in _CLAIM_KINDS:
        return
    spec = obj.get("spec")
    if obj["kind"] == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, dict) else None
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    if not isinstance(requests, list):
        return
    for request in requests:
        if not isinstance(request, dict):
            continue
        exactly = request.get("exactly")
        # v1beta1's defaulter leaves a request without a class alone (it has subrequests, or
        # validation rejects it); v1's always runs, but then validation rejects the missing
        # class. Skipping it here keeps both versions' stored objects.
        if isinstance(exactly, dict) and exactly.get("deviceClassName"):
            _default_request(exactly)
        subrequests = request.get("firstAvailable")
        if isinstance(subrequests, list):
            for sub in subrequests:
                _default_request(sub)
