"""What the search knows before it starts: checked requests, their class, and their candidates.

Upstream's Allocate validates every request and constraint of every claim before the
backtracking search (`search.Run.search`) begins; this module holds that first half: the
per-request data (device class, CEL expressions, device count), the gathering of candidates for
``allocationMode: All`` requests, and the parsing of claim constraints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dralib.allocator.constraints import (
    Constraint,
    DistinctAttributeConstraint,
    MatchAttributeConstraint,
)
from dralib.allocator.pools import Pool
from dralib.allocator.requests import ClaimInfo, RequestView
from dralib.allocator.slices import DeviceInfo, SliceInfo
from dralib.allocator.types import JSON, AllocationError, DeviceID, Features

__all__ = [
    "Candidate",
    "RequestData",
    "RequestKey",
    "Usable",
    "check_request",
    "parse_constraints",
]

# (claim index, request index, subrequest index)
RequestKey = tuple[int, int, int]


@dataclass
class Candidate:
    """A device considered for a request, with where it lives."""

    id: DeviceID
    device: DeviceInfo
    slice: SliceInfo
    pool: Pool


@dataclass
class RequestData:
    """Everything known about one request or subrequest before the search starts."""

    request: RequestView
    parent: str | None
    device_class: JSON | None = None
    num_devices: int = 0
    all_devices: list[Candidate] = field(default_factory=list)
    class_name: str = ""
    class_exprs: tuple[str, ...] = ()
    request_exprs: tuple[str, ...] = ()

    @property
    def request_name(self) -> str:
        """request or request/subrequest."""
        if self.parent is not None:
            return f"{self.parent}/{self.request.name}"
        return self.request.name


# Whether a device may serve the request on this node: selectors, node access, capacity.
Usable = Callable[[RequestData, SliceInfo, DeviceInfo, DeviceID], bool]


def _expressions(selectors: list[JSON]) -> tuple[str, ...]:
    return tuple(str((s.get("cel") or {}).get("expression", "")) for s in selectors)


def check_request(
    request: RequestView,
    *,
    parent: str | None,
    claim: ClaimInfo,
    features: Features,
    classes: dict[str, JSON],
    pools: list[Pool],
    usable: Usable,
) -> RequestData:
    """Check one request or subrequest and gather what the search needs about it.

    Raises AllocationError with upstream's message for a bad selector, a disabled feature, an
    unknown class, or an ``All`` request over an incomplete or invalid pool.
    """
    data = RequestData(request=request, parent=parent)
    for index, selector in enumerate(request.selectors):
        if not isinstance(selector, dict) or not isinstance(selector.get("cel"), dict):
            raise AllocationError(
                f"claim {claim.ref}, request {request.name}, selector #{index}: CEL "
                "expression empty (unsupported selector type?)"
            )
    if not features.AdminAccess and request.has_admin_access:
        raise AllocationError(
            f"claim {claim.ref}, request {request.name}: admin access is requested, but the "
            "feature is disabled"
        )
    if not request.class_name:
        raise AllocationError(
            f"claim {claim.ref}, request {request.name}: missing device class name "
            "(unsupported request type?)"
        )
    device_class = classes.get(request.class_name)
    if device_class is None:
        raise AllocationError(
            f"claim {claim.ref}, request {request.name}: could not retrieve device class "
            f'{request.class_name}: deviceclass.resource.k8s.io "{request.class_name}" '
            "not found"
        )
    data.device_class = device_class
    data.class_name = request.class_name
    data.class_exprs = _expressions((device_class.get("spec") or {}).get("selectors") or [])
    data.request_exprs = request.expressions
    mode = request.allocation_mode
    if mode == "ExactCount":
        data.num_devices = request.count
    elif mode == "All":
        data.all_devices = _all_candidates(data, claim=claim, pools=pools, usable=usable)
        data.num_devices = len(data.all_devices)
    else:
        raise AllocationError(
            f"claim {claim.ref}, request {request.name}: unsupported count mode {mode}"
        )
    return data


def _all_candidates(
    data: RequestData, *, claim: ClaimInfo, pools: list[Pool], usable: Usable
) -> list[Candidate]:
    # An "All" request must see every device, so a pool that is being updated or is invalid
    # fails the request instead of being skipped as the ExactCount search does.
    request = data.request
    candidates: list[Candidate] = []
    for pool in pools:
        if pool.is_incomplete:
            raise AllocationError(
                f"claim {claim.ref}, request {request.name}: asks for all devices, but "
                f"resource pool {pool.pool_id} is currently being updated"
            )
        if pool.is_invalid:
            raise AllocationError(
                f"claim {claim.ref}, request {request.name}: asks for all devices, but "
                f"resource pool {pool.pool_id} is currently invalid"
            )
        for info in pool.slices:
            for device in info.devices:
                device_id = (info.driver, info.pool, device.name)
                if usable(data, info, device, device_id):
                    candidates.append(Candidate(device_id, device, info, pool))
    return candidates


# Constraint kinds in the order upstream checks them; the first one set on an entry wins.
_CONSTRAINT_KINDS: tuple[tuple[str, type[Constraint]], ...] = (
    ("matchAttribute", MatchAttributeConstraint),
    ("distinctAttribute", DistinctAttributeConstraint),
)


def parse_constraints(claim: ClaimInfo, *, list_types: bool) -> list[Constraint]:
    """The claim's matchAttribute/distinctAttribute constraints; AllocationError for others."""
    result: list[Constraint] = []
    for index, raw in enumerate(claim.constraints):
        entry = raw if isinstance(raw, dict) else {}
        found = next(((f, kind) for f, kind in _CONSTRAINT_KINDS if entry.get(f)), None)
        if found is None:
            raise AllocationError(
                f"claim {claim.ref}, constraint #{index}: empty constraint (unsupported "
                "constraint type?)"
            )
        field_name, kind = found
        result.append(
            kind(
                request_names=list(entry.get("requests") or []),
                attribute_name=str(entry[field_name]),
                list_types=list_types,
            )
        )
    return result
