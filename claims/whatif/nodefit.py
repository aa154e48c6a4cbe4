"""NodePorts and NodeResourcesFit: does a node still have room for a pod, as the scheduler counts.

What runs on each node (`NodeUsage`: requests summed in the scheduler's units, how many pods,
host ports in use) comes from the synced pods that are bound and not finished (the scheduler's
informer lists pods with `status.phase!=Succeeded,status.phase!=Failed`). A `NodeLedger` keeps a
private copy for one question, so that every pod placed takes its share from the pods after it.

- NodePorts (`pkg/scheduler/framework/plugins/nodeports`, 1.36): a wanted host port conflicts with
  one in use for the same protocol and port on the same address, or on any address when either
  binds 0.0.0.0: "node(s) didn't have free ports for the requested pod ports".
- NodeResourcesFit (`noderesources/fit.go` `fitsRequest`, 1.36): "Too many pods" when the pods on
  the node plus this one pass `allocatable.pods`; then, for a pod asking for anything, "Insufficient
  cpu", "Insufficient memory", "Insufficient ephemeral-storage" and "Insufficient <name>" for each
  other scalar resource (hugepages-*, extended resources) whose request passes what is allocatable
  minus what is requested. An extended resource a DeviceClass backs (`extendedResourceName`, or
  `deviceclass.resource.kubernetes.io/<class>`) and that the node's allocatable does not offer is
  left to DynamicResources (`shouldDelegateResourceToDRA`): the implicit claim carries it. Several
  reasons of one node are all kept, as the plugin keeps them.

A node whose object carries no `status.allocatable` at all (hand-written or shaped nodes) says
nothing of its capacity: NodeResourcesFit is not applied to it, and the answer says so. Not
modelled: `ignoredResources`/`ignoredResourceGroups` of a custom scheduler profile. With a
`TopologyLedger`, PodTopologySpread and InterPodAffinity follow (`podtopology`), in the
scheduler's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.nodefilter import NodeFilter
from claims.whatif.podtopology import Placement, TopologyLedger
from claims.whatif.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    HostPort,
    allocatable_units,
    ports_conflict,
)

JSON = dict[str, Any]

NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
# Upstream's reasons (1.36).
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"
# Several reasons of one node's NodeResourcesFit status, joined for the (filter, reason) pair the
# node checks return; `status_reasons` splits them again for FitError's counts.
REASONS_JOINED = ", "
_NAMED = (CPU, MEMORY, EPHEMERAL_STORAGE)


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def status_reasons(plugin: str, reason: str) -> list[str]:
    """The reasons of one node's filter status, as FitError counts them (one per reason)."""
    if plugin == NODE_RESOURCES_FIT and REASONS_JOINED in reason:
        return reason.split(REASONS_JOINED)
    return [reason]


@dataclass(frozen=True)
class PodDemand:
    """What one pod (or a gang of pods bound for one node) takes of a node."""

    requests: Mapping[str, int] = field(default_factory=dict)
    ports: tuple[HostPort, ...] = ()
    pods: int = 1
    # What PodTopologySpread and InterPodAffinity read of the pod (None: nothing to check of
    # its own) and its node constraints (spread's nodeAffinityPolicy).
    placement: Placement | None = None
    node_filter: NodeFilter | None = None

    @staticmethod
    def total(demands: Iterable[PodDemand]) -> PodDemand:
        """Several pods on one node at once (a gang): their sums and all their ports."""
        requests: dict[str, int] = {}
        ports: list[HostPort] = []
        pods = 0
        first: PodDemand | None = None
        for demand in demands:
            first = first or demand
            for name, value in demand.requests.items():
                requests[name] = requests.get(name, 0) + value
            ports.extend(demand.ports)
            pods += demand.pods
        # The topology filters are asked about the first pod of the gang only.
        return PodDemand(
            requests=requests,
            ports=tuple(ports),
            pods=pods,
            placement=first.placement if first else None,
            node_filter=first.node_filter if first else None,
        )

    @property
    def empty(self) -> bool:
        return not self.requests and not self.ports and not self.pods


@dataclass
class NodeUsage:
    """What the bound, unfinished pods of one node request, in the scheduler's units."""

    requested: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    ports: list[HostPort] = field(default_factory=list)

    def add(self, demand: PodDemand) -> None:
        for name, value in demand.requests.items():
            self.requested[name] = self.requested.get(name, 0) + value
        self.pods += demand.pods
        self.ports.extend(demand.ports)

    def copy(self) -> NodeUsage:
        return NodeUsage(dict(self.requested), self.pods, list(self.ports))


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


# `status.allocatable` (its items) -> its units: nodes of one kind publish the same values, and
# every question read every node's again (a fifth of a what-if after a change at 5,000 nodes).
_units_of: dict[tuple[tuple[Any, Any], ...], dict[str, int]] = {}
_UNITS_KEPT = 10_000


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int] | None:
    """The node's allocatable in the scheduler's units; None when the node publishes none.
    The result is shared by every node with the same values: read it, never change it."""
    allocatable = (node.get("status") or {}).get("allocatable")
    if not isinstance(allocatable, Mapping):
        return None
    key = tuple(allocatable.items())
    try:
        found = _units_of.get(key)
    except TypeError:  # a value that is no quantity text (unhashable): read it every time
        return allocatable_units(allocatable)
    if found is None:
        if len(_units_of) >= _UNITS_KEPT:
            _units_of.clear()
        found = _units_of[key] = allocatable_units(allocatable)
    return found


def resource_reasons(
    demand: PodDemand,
    *,
    allocatable: Mapping[str, int],
    usage: NodeUsage,
    dra_backed: frozenset[str] = frozenset(),
) -> list[str]:
    """fitsRequest: the reasons the node cannot take the demand ([] when it can)."""
    reasons: list[str] = []
    if usage.pods + demand.pods > allocatable.get(PODS, 0):
        reasons.append(TOO_MANY_PODS)
    requested = usage.requested
    for name in _NAMED:
        want = demand.requests.get(name, 0)
        if want > 0 and want > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(insufficient(name))
    # Upstream walks a map here (no fixed order); sorted, so an answer is the same every time.
    for name in sorted(n for n in demand.requests if n not in _NAMED and n != PODS):
        want = demand.requests[name]
        if want <= 0:
            continue
        offered = allocatable.get(name, 0)
        if name in dra_backed and offered <= 0:
            continue
        if want > offered - requested.get(name, 0):
            reasons.append(insufficient(name))
    return reasons


class NodeLedger:
    """Per node, what is in use: the cluster's pods plus those placed during one question."""

    def __init__(
        self,
        usage: Mapping[str, NodeUsage],
        *,
        dra_backed: Iterable[str] = (),
        topology: TopologyLedger | None = None,
    ) -> None:
        self._cluster = usage
        self.topology = topology
        self._mine: dict[str, NodeUsage] = {}
        self.dra_backed = frozenset(dra_backed)
        self._allocatable: dict[str, dict[str, int] | None] = {}
        # Nodes the fit check could not be applied to (no status.allocatable).
        self.unknown_capacity: set[str] = set()

    def usage(self, name: str) -> NodeUsage:
        mine = self._mine.get(name)
        if mine is not None:
            return mine
        return self._cluster.get(name) or NodeUsage()

    def allocatable(self, node: Mapping[str, Any]) -> dict[str, int] | None:
        name = _name(node)
        if name not in self._allocatable:
            self._allocatable[name] = node_allocatable(node)
        return self._allocatable[name]

    def check(self, node: Mapping[str, Any], demand: PodDemand) -> tuple[str, str]:
        """(filter, reason) of NodePorts or NodeResourcesFit when it removes the node, or
        ("", "")."""
        name = _name(node)
        usage = self.usage(name)
        if demand.ports and ports_conflict(usage.ports, demand.ports):
            return NODE_PORTS, PORTS_TAKEN
        allocatable = self.allocatable(node)
        if allocatable is None:
            if demand.pods or demand.requests:
                self.unknown_capacity.add(name)
        else:
            reasons = resource_reasons(
                demand, allocatable=allocatable, usage=usage, dra_backed=self.dra_backed
            )
            if reasons:
                return NODE_RESOURCES_FIT, REASONS_JOINED.join(reasons)
        if self.topology is not None and demand.pods:
            return self.topology.check(node, demand.placement, demand.node_filter or NodeFilter())
        return "", ""

    def place(self, node_name: str, demand: PodDemand) -> None:
        """Count a pod placed on the node for the questions after it."""
        mine = self._mine.get(node_name)
        if mine is None:
            mine = self._mine[node_name] = (self._cluster.get(node_name) or NodeUsage()).copy()
        mine.add(demand)
        if self.topology is not None and demand.placement is not None:
            self.topology.place(node_name, demand.placement)


def usage_by_node(
    pods: Iterable[tuple[str, Mapping[str, int], Sequence[HostPort]]],
) -> dict[str, NodeUsage]:
    """Per node, the usage of (node, requests, host ports) of its pods."""
    out: dict[str, NodeUsage] = {}
    for node, requests, ports in pods:
        usage = out.get(node)
        if usage is None:
            usage = out[node] = NodeUsage()
        usage.add(PodDemand(requests=requests, ports=tuple(ports)))
    return out
