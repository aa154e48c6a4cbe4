"""What a pod asks of its node: resource requests and limits, host ports, LimitRange defaults.

Pure functions over pod specs (no Django: the sync, the what-if and the demo share them), each
after its upstream counterpart:

- `pod_requests` / `pod_limits`: `PodRequests` / `PodLimits` of `k8s.io/component-helpers/resource`
  (1.36): regular containers summed; init containers in order, each needing its own requests plus
  those of the restartable (sidecar, `restartPolicy: Always`) init containers before it, the pod
  needing the largest of those and the sum; a sidecar also adds to the sum. Pod-level resources
  (`spec.resources`: cpu, memory, hugepages-*) replace the containers' totals; `spec.overhead` is
  added (to limits only where a limit is set). With `status`, a running pod counts what its
  containers were given by an in-place resize when that is more (`UseStatusResources`).
- `scheduler_units`: the scheduler's `framework.Resource` of those requests: millicores for cpu,
  whole units (rounded up) for the rest; names that are neither native, hugepages, attachable
  volumes nor domain-prefixed are not scalar resources and are dropped, as `Resource.Add` drops
  them. `pod_request_units` gives the same figures summed in integers (millicores, bytes) when
  every counted quantity is whole in its unit, each distinct text parsed once (the sync reads it
  for every pod); otherwise the exact sum, rounded up after adding.
- `host_ports`: `schedutil.GetHostPorts`: container ports with a hostPort, of the containers and
  of the restartable init containers, hostIP defaulting to 0.0.0.0 and protocol to TCP.
- `with_limit_ranges`: the API server's request defaulting (a missing request of a resource with
  a limit takes the limit) and the LimitRanger admission plugin's defaults (`default` limits,
  `defaultRequest` requests of every `Container` item), for a pod about to be created.
- `is_best_effort`, `is_terminating`: what quota scopes read (`qos.GetPodQOS`,
  `activeDeadlineSeconds`).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from dralib.allocator.quantity import Quantity, QuantityError

JSON = dict[str, Any]
# Exact amounts per resource name.
Amounts = dict[str, Fraction]
# The same arithmetic (sums, maxima) runs on exact amounts or on whole scheduler units.
N = TypeVar("N", Fraction, int)
# One ResourceList read as amounts of N: (the list, the field's path) -> amounts.
Reader = Callable[[Any, str], dict[str, N]]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
_ATTACHABLE_PREFIX = "attachable-volumes-"
_NATIVE_PREFIX = "kubernetes.io/"
# What pod-level resources (`spec.resources`) may set (`IsSupportedPodLevelResource`).
_POD_LEVEL = frozenset({CPU, MEMORY})
_QOS_RESOURCES = frozenset({CPU, MEMORY})
_ALWAYS = "Always"
DEFAULT_HOST_IP = "0.0.0.0"
_RESIZE_PENDING = "PodResizePending"
_INFEASIBLE = "Infeasible"


class ResourceError(ValueError):
    """A quantity that cannot be read; `path` names the field within the pod spec."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def amount(value: Any, *, path: str = "") -> Fraction:
    """The exact value of one quantity (text or number)."""
    try:
        return Quantity.parse(str(value)).exact
    except (QuantityError, ValueError) as exc:
        raise ResourceError(path, f"not a quantity: {value!r}") from exc


def amounts(resources: Any, path: str = "") -> Amounts:
    """A ResourceList as exact amounts ({} for anything that is not a map)."""
    if not isinstance(resources, Mapping):
        return {}
    return {str(name): amount(value, path=f"{path}[{name}]") for name, value in resources.items()}


def quantity_text(value: Fraction, name: str = "") -> str:
    """An exact amount written as a Kubernetes quantity: millis for fractions, else a plain
    integer in the largest binary (memory-like) or decimal suffix that keeps it whole."""
    if value.denominator != 1:
        millis = value * 1000
        if millis.denominator == 1:
            return f"{millis.numerator}m"
        return str(float(value))
    whole = value.numerator
    if whole == 0:
        return "0"
    binary = (
        name in {MEMORY, EPHEMERAL_STORAGE}
        or name.startswith(HUGEPAGES_PREFIX)
        or any(name.endswith(f".{kind}") for kind in (MEMORY, EPHEMERAL_STORAGE))
    )
    suffixes = (
        (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
        if binary
        else (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))
    )
    for suffix, size in suffixes:
        if whole % size == 0 and abs(whole) >= size:
            return f"{whole // size}{suffix}"
    return str(whole)


def _add(total: dict[str, N], more: Mapping[str, N]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _maximum(total: dict[str, N], other: Mapping[str, N]) -> None:
    for name, value in other.items():
        if name not in total or value > total[name]:
            total[name] = value


def _is_map(value: Any) -> bool:
    # A parsed pod holds dicts: the type test spares the slower ABC check on every pod synced.
    return type(value) is dict or isinstance(value, Mapping)


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    containers = spec.get(key)
    if not isinstance(containers, list):
        return []
    return [c for c in containers if _is_map(c)]


def _resources(container: Mapping[str, Any]) -> Mapping[str, Any]:
    resources = container.get("resources")
    return resources if type(resources) is dict or isinstance(resources, Mapping) else {}


def _statuses(status: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for entry in (status or {}).get(key) or []:
            if isinstance(entry, Mapping) and entry.get("name") is not None:
                out.setdefault(str(entry["name"]), entry)
    return out


def _resize_infeasible(status: Mapping[str, Any] | None) -> bool:
    for condition in (status or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == _RESIZE_PENDING:
            return condition.get("reason") == _INFEASIBLE
    return False


Picker = Callable[[Mapping[str, Any], str], dict[str, N]]


def _aggregate(spec: Mapping[str, Any], pick: Picker[N]) -> dict[str, N]:
    """`aggregateContainerResourcesByFn`: `pick(container, path)` gives one container's amounts."""
    total: dict[str, N] = {}
    for index, container in enumerate(_containers(spec, "containers")):
        _add(total, pick(container, f"spec.containers[{index}]"))
    sidecars: dict[str, N] = {}
    init_peak: dict[str, N] = {}
    for index, container in enumerate(_containers(spec, "initContainers")):
        own = pick(container, f"spec.initContainers[{index}]")
        if container.get("restartPolicy") == _ALWAYS:
            _add(total, own)
            _add(sidecars, own)
            needed = dict(sidecars)
        else:
            needed = dict(own)
            _add(needed, sidecars)
        _maximum(init_peak, needed)
    _maximum(total, init_peak)
    return total


def _spec_picker(field: str, read: Reader[N]) -> Picker[N]:
    def pick(container: Mapping[str, Any], path: str) -> dict[str, N]:
        return read(_resources(container).get(field), f"{path}.resources.{field}")

    return pick


def _status_requests(
    spec: Mapping[str, Any], status: Mapping[str, Any], read: Reader[N]
) -> dict[str, N]:
    """AggregateContainerRequests with UseStatusResources: the larger of what the spec asks,
    what the kubelet allocated and what it actuated (an in-place resize under way), or only the
    last two when the resize is infeasible."""
    statuses = _statuses(status)
    infeasible = _resize_infeasible(status)
    from_spec = _spec_picker("requests", read)

    def allocated(container: Mapping[str, Any], path: str) -> dict[str, N]:
        entry = statuses.get(str(container.get("name")))
        if entry is not None and isinstance(entry.get("allocatedResources"), Mapping):
            return read(entry["allocatedResources"], "")
        return {} if infeasible else from_spec(container, path)

    def actuated(container: Mapping[str, Any], path: str) -> dict[str, N]:
        entry = statuses.get(str(container.get("name"))) or {}
        actual = _resources(entry).get("requests")
        if isinstance(actual, Mapping):
            return read(actual, "")
        return allocated(container, path)

    result: dict[str, N] = {} if infeasible else _aggregate(spec, from_spec)
    _maximum(result, _aggregate(spec, actuated))
    _maximum(result, _aggregate(spec, allocated))
    return result


def _pod_level(spec: Mapping[str, Any], field: str, read: Reader[N]) -> dict[str, N]:
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    found = read(resources.get(field), f"spec.resources.{field}")
    return {k: v for k, v in found.items() if k in _POD_LEVEL or k.startswith(HUGEPAGES_PREFIX)}


def _requests(
    spec: Mapping[str, Any], status: Mapping[str, Any] | None, read: Reader[N]
) -> dict[str, N]:
    if status is not None and _statuses(status):
        requests = _status_requests(spec, status, read)
    else:
        requests = _aggregate(spec, _spec_picker("requests", read))
    requests.update(_pod_level(spec, "requests", read))
    _add(requests, read(spec.get("overhead"), "spec.overhead"))
    return requests


def pod_requests(spec: Mapping[str, Any], *, status: Mapping[str, Any] | None = None) -> Amounts:
    """PodRequests: what the pod asks for, exactly (see the module docstring)."""
    return _requests(spec, status, amounts)


def pod_limits(spec: Mapping[str, Any]) -> Amounts:
    """PodLimits: the pod's limits; overhead is added to the limits that are set."""
    limits = _aggregate(spec, _spec_picker("limits", amounts))
    pod_level = _pod_level(spec, "limits", amounts)
    if pod_level or _pod_level(spec, "requests", amounts):
        limits.update(pod_level)
    for name, value in amounts(spec.get("overhead"), path="spec.overhead").items():
        if limits.get(name):
            limits[name] += value
    return limits


def is_scalar(name: str) -> bool:
    """`IsScalarResourceName`: extended, hugepages, prefixed native and attachable volumes."""
    return (
        "/" in name
        or name.startswith(HUGEPAGES_PREFIX)
        or name.startswith(_ATTACHABLE_PREFIX)
        or _NATIVE_PREFIX in name
    )


# The implicit extended resource name every DeviceClass has (KEP-5004).
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_extended(name: str) -> bool:
    """`IsExtendedResourceName`: a domain-prefixed name outside kubernetes.io, not `requests.`;
    a DeviceClass's implicit name counts too (the pod evaluator charges
    `requests.deviceclass.resource.kubernetes.io/<class>`, upstream's pods_test)."""
    if "/" not in name or name.startswith("requests."):
        return False
    return _NATIVE_PREFIX not in name or name.startswith(DEVICE_CLASS_RESOURCE_PREFIX)


def pod_level_set(spec: Mapping[str, Any]) -> bool:
    """`IsPodLevelResourcesSet`: spec.resources names cpu, memory or hugepages."""
    return bool(_pod_level(spec, "requests", amounts) or _pod_level(spec, "limits", amounts))


def scheduler_units(requests: Mapping[str, Fraction]) -> dict[str, int]:
    """The scheduler's `framework.Resource` of exact requests: cpu in millicores, the rest in
    whole units, each rounded up (`MilliValue`, `Value`); zero amounts are left out."""
    out: dict[str, int] = {}
    for name, value in requests.items():
        if name == CPU:
            units = math.ceil(value * 1000)
        elif name in (MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar(name):
            units = math.ceil(value)
        else:
            continue
        if units:
            out[name] = units
    return out


class _NotWhole(Exception):
    """A quantity that is not a whole number of its scheduler unit, or not a quantity."""


# How many distinct quantity texts `pod_request_units` remembers: a cluster's pods repeat a few
# dozen request values; past the bound the oldest are read again.
UNIT_TEXTS = 4096


@functools.lru_cache(maxsize=UNIT_TEXTS)
def _whole_units(text: str) -> tuple[bool, int | None, int | None]:
    """(readable, millis, whole units) of a quantity text; None where that unit does not hold
    the amount exactly."""
    try:
        exact = Quantity.parse(text).exact
    except (QuantityError, ValueError):
        return False, None, None
    millis = exact * 1000
    return (
        True,
        millis.numerator if millis.denominator == 1 else None,
        exact.numerator if exact.denominator == 1 else None,
    )


@functools.lru_cache(maxsize=1024)
def _counted_in_units(name: str) -> bool:
    return name in (MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar(name)


def _units(resources: Any, path: str = "") -> dict[str, int]:
    """A ResourceList in scheduler units (cpu in millis, the rest whole), names the scheduler
    does not count left out; `_NotWhole` when a counted amount is not whole in its unit (its
    rounding up must come after the sum) or any value is no quantity (the exact reading then
    names the field)."""
    if not _is_map(resources):
        return {}
    out: dict[str, int] = {}
    for key, value in resources.items():
        readable, millis, whole = _whole_units(value if type(value) is str else str(value))
        name = str(key)
        if name == CPU:
            units = millis
        elif _counted_in_units(name):
            units = whole
        elif readable:
            continue
        else:
            units = None
        if units is None:
            raise _NotWhole
        out[name] = units
    return out


def pod_request_units(
    spec: Mapping[str, Any], *, status: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """`scheduler_units(pod_requests(spec, status=status))`, summed in integers when every
    counted request is whole in its unit (millicores, bytes), as pods' requests nearly always
    are; otherwise, or when a value is unreadable, the exact amounts (which raise ResourceError
    naming the field)."""
    try:
        units = _requests(spec, status, _units)
    except _NotWhole:
        return scheduler_units(pod_requests(spec, status=status))
    return {name: value for name, value in units.items() if value}


def allocatable_units(allocatable: Mapping[str, Any]) -> dict[str, int]:
    """A node's `status.allocatable` in the scheduler's units (unreadable values count 0)."""
    out: dict[str, int] = {}
    for name, value in allocatable.items():
        try:
            exact = amount(value)
        except ResourceError:
            continue
        out[str(name)] = math.floor(exact * 1000) if name == CPU else math.floor(exact)
    return out


HostPort = tuple[str, str, int]


def host_ports(spec: Mapping[str, Any]) -> list[HostPort]:
    """(hostIP, protocol, hostPort) of every container port with a hostPort (GetHostPorts)."""
    containers = [
        c for c in _containers(spec, "initContainers") if c.get("restartPolicy") == _ALWAYS
    ] + _containers(spec, "containers")
    out: list[HostPort] = []
    for container in containers:
        for port in container.get("ports") or []:
            if not isinstance(port, Mapping):
                continue
            try:
                number = int(port.get("hostPort") or 0)
            except (TypeError, ValueError):
                continue
            if number <= 0:
                continue
            out.append(
                (
                    str(port.get("hostIP") or DEFAULT_HOST_IP),
                    str(port.get("protocol") or "TCP"),
                    number,
                )
            )
    return out


def ports_conflict(used: Iterable[HostPort], wanted: Iterable[HostPort]) -> bool:
    """HostPortInfo.CheckConflict for each wanted port: the same protocol and port on the same
    address, or on any address when either side binds 0.0.0.0."""
    by_port: dict[tuple[str, int], set[str]] = {}
    for ip, protocol, port in used:
        by_port.setdefault((protocol, port), set()).add(ip)
    for ip, protocol, port in wanted:
        taken = by_port.get((protocol, port))
        if not taken:
            continue
        if ip == DEFAULT_HOST_IP or DEFAULT_HOST_IP in taken or ip in taken:
            return True
    return False


def limit_range_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> tuple[JSON, JSON]:
    """(default requests, default limits) for containers, from LimitRange specs
    (`defaultContainerResourceRequirements`; a later range's value wins, as upstream's loop).

    A stored LimitRange has its item defaults filled by the API server; an unstored one (pasted)
    gets them here: `default` falls back to `max`, `defaultRequest` to `default`, then `min`.
    """
    requests: JSON = {}
    limits: JSON = {}
    for limit_range in limit_ranges:
        spec = limit_range.get("spec") if isinstance(limit_range, Mapping) else None
        for item in (spec or {}).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") != "Container":
                continue
            default = dict(item.get("default") or {})
            for name, value in (item.get("max") or {}).items():
                default.setdefault(name, value)
            default_request = dict(item.get("defaultRequest") or {})
            for name, value in default.items():
                default_request.setdefault(name, value)
            for name, value in (item.get("min") or {}).items():
                default_request.setdefault(name, value)
            limits.update(default)
            requests.update(default_request)
    return requests, limits


def with_limit_ranges(spec: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> JSON:
    """The pod spec as the API server stores it: requests defaulted to limits, then the
    namespace's LimitRange defaults for what is still missing (a copy; `spec` is not changed)."""
    default_requests, default_limits = limit_range_defaults(limit_ranges)
    out = copy.deepcopy(dict(spec))
    for key in ("initContainers", "containers"):
        for container in _containers(out, key):
            resources = container.get("resources")
            if not isinstance(resources, dict):
                resources = {}
                container["resources"] = resources  # type: ignore[index]
            limits = dict(resources.get("limits") or {})
            requests = dict(resources.get("requests") or {})
            for name, value in limits.items():
                requests.setdefault(name, value)
            for name, value in default_limits.items():
                limits.setdefault(name, value)
            for name, value in default_requests.items():
                requests.setdefault(name, value)
            if limits:
                resources["limits"] = limits
            if requests:
                resources["requests"] = requests
    return out


def with_request_defaults(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec with the API server's request defaulting (a missing request of a resource with
    a limit takes the limit): `spec` itself when nothing is missing, as in stored pods."""
    for key in ("initContainers", "containers"):
        for container in _containers(spec, key):
            resources = _resources(container)
            limits = resources.get("limits")
            requests = resources.get("requests") or {}
            if isinstance(limits, Mapping) and any(name not in requests for name in limits):
                return with_limit_ranges(spec, ())
    return spec


def is_best_effort(spec: Mapping[str, Any]) -> bool:
    """GetPodQOS == BestEffort: no container and no pod-level resources ask for cpu or memory."""
    resources = spec.get("resources")
    if isinstance(resources, Mapping):
        for field in ("requests", "limits"):
            if _QOS_RESOURCES & set((resources.get(field) or {}).keys()):
                return False
    for key in ("initContainers", "containers"):
        for container in _containers(spec, key):
            for field in ("requests", "limits"):
                values = _resources(container).get(field) or {}
                for name, value in values.items() if isinstance(values, Mapping) else ():
                    if name in _QOS_RESOURCES and amount(value) != 0:
                        return False
    return True


def is_terminating(spec: Mapping[str, Any]) -> bool:
    """The quota scope Terminating: `activeDeadlineSeconds` set and not negative."""
    deadline = spec.get("activeDeadlineSeconds")
    return isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0
