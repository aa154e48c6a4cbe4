"""Claims and their requests, read from resource.k8s.io/v1 ResourceClaim objects.

Upstream reads requests through an accessor that hides whether it is an `exactly` request or one
of the `firstAvailable` subrequests; `RequestView` plays that part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dralib.allocator.limits import check_claim
from dralib.allocator.quantity import Quantity
from dralib.allocator.types import JSON, ScenarioError, quantity_field


@dataclass
class RequestView:
    """An exact request or a subrequest, as the allocator sees it."""

    name: str
    class_name: str
    allocation_mode: str
    count: int
    admin_access: bool
    has_admin_access: bool
    selectors: list[JSON]
    tolerations: list[JSON]
    capacity_raw: JSON | None
    capacity_requests: dict[str, Quantity] | None
    expressions: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: JSON, *, name: str, where: str, subrequest: bool) -> RequestView:
        """Read the fields of an ExactDeviceRequest or DeviceSubRequest."""
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: expected an object")
        # The API server defaults allocationMode to ExactCount and count to 1 (as the normalizer
        # in dralib.kube does for objects that skipped it); the allocator itself, like
        # upstream's, takes the fields as given: an empty mode is refused when the request is
        # checked ("unsupported count mode") and a missing count is Go's zero.
        mode = raw.get("allocationMode") or ""
        if not isinstance(mode, str):
            raise ScenarioError(f"{where}.allocationMode: must be a string, got {mode!r}")
        count_raw = raw.get("count")
        if count_raw is None:
            count_raw = 0
        if isinstance(count_raw, bool) or not isinstance(count_raw, int):
            raise ScenarioError(f"{where}.count: must be an integer, got {count_raw!r}")
        capacity_raw = raw.get("capacity")
        capacity_requests = None
        if capacity_raw is not None:
            requests = capacity_raw.get("requests")
            if requests is not None:
                capacity_requests = {
                    key: quantity_field(value, where=f"{where}.capacity.requests.{key}")
                    for key, value in requests.items()
                }
        admin = None if subrequest else raw.get("adminAccess")
        selectors = raw.get("selectors") or []
        if not isinstance(selectors, list):
            raise ScenarioError(f"{where}.selectors: must be a list")
        tolerations = raw.get("tolerations") or []
        if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
            raise ScenarioError(f"{where}.tolerations: must be a list of objects")
        expressions = tuple(
            str((s.get("cel") or {}).get("expression", "")) if isinstance(s, dict) else ""
            for s in selectors
        )
        return cls(
            expressions=expressions,
            name=name,
            class_name=str(raw.get("deviceClassName") or ""),
            allocation_mode=mode,
            count=count_raw,
            admin_access=admin is True,
            has_admin_access=admin is not None,
            selectors=selectors,
            tolerations=list(tolerations),
            capacity_raw=capacity_raw,
            capacity_requests=capacity_requests,
        )


@dataclass
class RequestInfo:
    """One entry of `spec.devices.requests`: either exact or a list of subrequests."""

    name: str
    exact: RequestView | None
    subrequests: list[RequestView] = field(default_factory=list)


@dataclass
class ClaimInfo:
    """A claim to allocate."""

    raw: JSON
    name: str
    namespace: str
    requests: list[RequestInfo]
    constraints: list[JSON]
    config: list[JSON]

    @property
    def ref(self) -> str:
        """namespace/name, or just name, like klog.KObj."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def parse(cls, raw: Any, *, index: int) -> ClaimInfo:
        """Read a ResourceClaim object."""
        if not isinstance(raw, dict):
            raise ScenarioError(f"claims[{index}]: expected a ResourceClaim object")
        metadata = raw.get("metadata") or {}
        name = str(metadata.get("name") or f"claims[{index}]")
        namespace = str(metadata.get("namespace") or "")
        where = f"ResourceClaim {namespace + '/' if namespace else ''}{name}"
        devices = (raw.get("spec") or {}).get("devices") or {}
        if not isinstance(devices, dict):
            raise ScenarioError(f"{where}: spec.devices must be an object")
        check_claim(devices, where=where)
        requests: list[RequestInfo] = []
        for r_index, request in enumerate(devices.get("requests") or []):
            r_where = f"{where}: spec.devices.requests[{r_index}]"
            if not isinstance(request, dict) or not isinstance(request.get("name"), str):
                raise ScenarioError(f"{r_where}: expected a request with a name")
            r_name = request["name"]
            first_available = request.get("firstAvailable") or []
            if first_available:
                subs = []
                for s_index, sub in enumerate(first_available):
                    s_name = sub.get("name") if isinstance(sub, dict) else None
                    if not isinstance(s_name, str):
                        raise ScenarioError(f"{r_where}.firstAvailable[{s_index}]: needs a name")
                    subs.append(
                        RequestView.parse(
                            sub,
                            name=s_name,
                            where=f"{r_where}.firstAvailable[{s_index}]",
                            subrequest=True,
                        )
                    )
                requests.append(RequestInfo(name=r_name, exact=None, subrequests=subs))
            elif request.get("exactly") is not None:
                exact = RequestView.parse(
                    request["exactly"], name=r_name, where=f"{r_where}.exactly", subrequest=False
                )
                requests.append(RequestInfo(name=r_name, exact=exact))
            else:
                raise ScenarioError(f"{r_where}: needs exactly or firstAvailable")
        constraints = devices.get("constraints") or []
        config = devices.get("config") or []
        for field_name, entries in (("constraints", constraints), ("config", config)):
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise ScenarioError(f"{where}: spec.devices.{field_name} must be a list of objects")
        return cls(
            raw=raw,
            name=name,
            namespace=namespace,
            requests=requests,
            constraints=list(constraints),
            config=list(config),
        )
