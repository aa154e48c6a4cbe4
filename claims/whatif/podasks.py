"""What a pod of the input asks, once the API server has stored it: of its node and of quota.

A what-if pod is a pod about to be created. The API server first defaults a missing request of a
resource with a limit to that limit, then the LimitRanger admission plugin fills what is still
missing from the namespace's LimitRanges (`resources.with_limit_ranges`); from that spec come the
node's share (`PodDemand`: PodRequests in the scheduler's units, host ports, one pod) and what
ResourceQuota admission reads (PodRequests and PodLimits exactly, the QoS class, the scopes).
No Django: the demo cluster admits its pods with it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.inputs import WhatIfError
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.nodefit import PodDemand
from claims.whatif.podtopology import Placement
from claims.whatif.resources import (
    Amounts,
    ResourceError,
    amounts,
    host_ports,
    is_best_effort,
    is_terminating,
    pod_level_set,
    pod_limits,
    pod_requests,
    scheduler_units,
    with_limit_ranges,
    with_request_defaults,
)

JSON = dict[str, Any]


@dataclass(frozen=True)
class ContainerAsks:
    """Which resources one container names among its requests and limits (quota Constraints)."""

    name: str
    requests: frozenset[str]
    limits: frozenset[str]


@dataclass(frozen=True)
class PodAsks:
    """One pod as stored: what it takes of a node and what quota admission counts."""

    spec: JSON
    requests: Amounts
    limits: Amounts
    demand: PodDemand
    best_effort: bool
    terminating: bool
    priority_class: str
    cross_namespace_affinity: bool
    containers: tuple[ContainerAsks, ...] = field(default=())
    # Pod-level resources (spec.resources) are set: quota then asks nothing of containers.
    pod_level: bool = False

    @classmethod
    def nothing(cls) -> PodAsks:
        """The stand-in pod of claims asked for without a pod: it takes no node room."""
        return cls(
            spec={},
            requests={},
            limits={},
            demand=PodDemand(pods=0),
            best_effort=True,
            terminating=False,
            priority_class="",
            cross_namespace_affinity=False,
        )


def _cross_namespace(spec: Mapping[str, Any]) -> bool:
    """usesCrossNamespacePodAffinity: an affinity term naming namespaces or a selector."""
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), Mapping) else {}
    for kind in ("podAffinity", "podAntiAffinity"):
        section = (affinity or {}).get(kind)
        if not isinstance(section, Mapping):
            continue
        terms = list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            w.get("podAffinityTerm") or {}
            for w in section.get("preferredDuringSchedulingIgnoredDuringExecution") or []
            if isinstance(w, Mapping)
        ]
        for term in terms:
            if isinstance(term, Mapping) and (
                term.get("namespaces") or term.get("namespaceSelector") is not None
            ):
                return True
    return False


def _container_asks(spec: Mapping[str, Any]) -> tuple[ContainerAsks, ...]:
    out = []
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, Mapping):
                continue
            resources = container.get("resources") or {}
            out.append(
                ContainerAsks(
                    name=str(container.get("name") or ""),
                    requests=frozenset((resources.get("requests") or {}).keys()),
                    limits=frozenset((resources.get("limits") or {}).keys()),
                )
            )
    return tuple(out)


def pod_asks(
    spec: Mapping[str, Any],
    *,
    limit_ranges: Iterable[Mapping[str, Any]] = (),
    where: str = "",
    namespace: str = "",
    labels: Mapping[str, str] | None = None,
    node_filter: NodeFilter | None = None,
) -> PodAsks:
    """The pod as the API server would store it, and what it asks (WhatIfError naming the field
    for a quantity that cannot be read). With its `namespace` and `labels` (and its node
    constraints), what it asks includes what the topology filters read of it."""
    ranges = list(limit_ranges)
    # Without LimitRanges only the API server's request defaulting applies (no copy when a
    # stored pod needs none).
    stored = with_limit_ranges(spec, ranges) if ranges else dict(with_request_defaults(spec))
    try:
        requests = pod_requests(stored)
        limits = pod_limits(stored)
        best_effort = is_best_effort(stored)
        pod_level = pod_level_set(stored)
    except ResourceError as exc:
        raise WhatIfError(f"{where}: {exc.path}" if where else exc.path, exc.message) from exc
    priority_class = stored.get("priorityClassName")
    return PodAsks(
        spec=stored,
        requests=requests,
        limits=limits,
        demand=PodDemand(
            requests=scheduler_units(requests),
            ports=tuple(host_ports(stored)),
            placement=(
                Placement.of(stored, namespace=namespace, labels=labels or {})
                if namespace
                else None
            ),
            node_filter=node_filter,
        ),
        best_effort=best_effort,
        terminating=is_terminating(stored),
        priority_class=priority_class if isinstance(priority_class, str) else "",
        cross_namespace_affinity=_cross_namespace(stored),
        containers=_container_asks(stored),
        pod_level=pod_level,
    )


def check_quantities(spec: Mapping[str, Any], *, where: str) -> None:
    """Refuse a pod spec whose requests, limits or overhead cannot be read, naming the field."""
    try:
        pod_requests(spec)
        pod_limits(spec)
        amounts(spec.get("overhead"), path="spec.overhead")
    except ResourceError as exc:
        raise WhatIfError(f"{where}: {exc.path}", exc.message) from exc
