"""Rules the API server's validation enforces beyond field types, checked on the v1 shape.

The shape check lets a well-typed but impossible object through (a device listed twice in one
slice, a request for -3 devices, two requests with one name); the allocator would then answer
nonsense or blame the wrong object. These are the rules that matter for what we compute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Fail = Callable[[str, str], Exception]


def _unique_names(items: list[Any], *, path: str, what: str, fail: Fail) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        name = item.get("name")
        if not isinstance(name, str):
            continue
        if name in seen:
            raise fail(
                f"{path}[{index}].name", f"duplicate {what} {name!r} (also at {path}[{seen[name]}])"
            )
        seen[name] = index


def _check_count(request: dict[str, Any], *, path: str, fail: Fail) -> None:
    mode = request.get("allocationMode") or "ExactCount"
    count = request.get("count")
    if mode == "ExactCount" and isinstance(count, int) and count < 1:
        raise fail(
            f"{path}.count", f"must be at least 1 with allocationMode ExactCount, got {count}"
        )


def _check_claim_spec(spec: Any, *, path: str, fail: Fail) -> None:
    if not isinstance(spec, dict):
        return
    devices = spec.get("devices")
    if not isinstance(devices, dict):
        return
    requests = devices.get("requests")
    if not isinstance(requests, list):
        return
    _unique_names(requests, path=f"{path}.devices.requests", what="request", fail=fail)
    for index, request in enumerate(requests):
        if not isinstance(request, dict):
            continue
        where = f"{path}.devices.requests[{index}]"
        if isinstance(request.get("exactly"), dict):
            _check_count(request["exactly"], path=f"{where}.exactly", fail=fail)
        subrequests = request.get("firstAvailable")
        if isinstance(subrequests, list):
            _unique_names(subrequests, path=f"{where}.firstAvailable", what="subrequest", fail=fail)
            for sub_index, sub in enumerate(subrequests):
                if isinstance(sub, dict):
                    _check_count(sub, path=f"{where}.firstAvailable[{sub_index}]", fail=fail)


def check_semantics(obj: dict[str, Any], *, fail: Fail) -> None:
    """Raise `fail(field, reason)` for the first rule the v1-shaped object breaks."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind == "ResourceSlice" and isinstance(spec, dict):
        devices = spec.get("devices")
        if isinstance(devices, list):
            _unique_names(devices, path="spec.devices", what="device", fail=fail)
        counters = spec.get("sharedCounters")
        if isinstance(counters, list):
            _unique_names(counters, path="spec.sharedCounters", what="counter set", fail=fail)
    elif kind == "ResourceClaim":
        _check_claim_spec(spec, path="spec", fail=fail)
    elif kind == "ResourceClaimTemplate" and isinstance(spec, dict):
        _check_claim_spec(spec.get("spec"), path="spec.spec", fail=fail)
