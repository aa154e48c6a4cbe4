"""Preemption on request: the node and the fewest lower-priority pods the scheduler would evict.

A port of kube-scheduler's DefaultPreemption PostFilter (`pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go` and `pkg/scheduler/framework/preemption/preemption.go`,
1.34-1.36) for the pod a what-if asks about when it fits nowhere:

- The pod's priority and preemption policy are what priority admission gives it
  (`plugin/pkg/admission/priority`): its PriorityClass's value, else the global default class's
  (the lowest value when several claim it), else 0; a `spec.priority` that differs, or a class
  that does not exist, is refused as admission refuses it; a pod whose policy is `Never`
  preempts nobody.
- Candidate nodes are those whose filter failure preemption can resolve: a node removed by
  NodeUnschedulable, NodeName, TaintToleration or NodeAffinity (UnschedulableAndUnresolvable) is
  not one. DynamicResources has no PreFilter extensions, so the scheduler's dry run never counts
  a victim's devices as free: a node whose devices do not fit is no candidate either.
- On each candidate (`select_victims`, SelectVictimsOnNode) every pod of lower priority is
  removed; if the pod then fits (NodePorts, NodeResourcesFit, PodTopologySpread and
  InterPodAffinity, the last two without the removed pods' share), victims
  are reprieved from the most important down (higher priority, then earlier start), those whose
  eviction would exceed a PodDisruptionBudget's `disruptionsAllowed` first; what cannot be
  reprieved is a victim.
- `pick_node` (pickOneNodeForPreemption) takes the node with the fewest PDB violations, then the
  lowest highest victim priority, the lowest sum of priorities, the fewest victims, the latest
  earliest start among the highest-priority victims, then the first in name order.

Told apart from upstream: candidates are sought in node-name order, where the scheduler starts at
a random offset, so the answer is the same each time (as upstream, the search stops once it holds
10% of the nodes, at least 100, one of them breaking no budget); the pods' creation time stands
for their start time; nominated pods are not modelled. PodTopologySpread and InterPodAffinity
see the node without the victims, as their RemovePod extensions tell the dry run. A victim's claim
frees its devices once no other consumer holds it (`status.reservedFor`): the devices are listed,
but, as in the scheduler, they do not make the node a candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from claims.models import Pod, PodDisruptionBudget, PriorityClass, ResourceClaim
from claims.whatif.listing import TERMINAL_PHASES
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.nodefit import NODE_PORTS, NODE_RESOURCES_FIT, NodeLedger, NodeUsage, PodDemand
from claims.whatif.podtopology import (
    AFFINITY,
    AFFINITY_MISMATCH,
    SPREAD,
    SPREAD_MISSING_LABEL,
    PodRecord,
    TopologyLedger,
    record_of,
    selector_matches,
)
from claims.whatif.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from inventory.sync import chunks

JSON = dict[str, Any]

PREEMPT_LOWER = "PreemptLowerPriority"
NEVER = "Never"
# Priorities of the two classes every API server creates (pkg/apis/scheduling/types.go).
SYSTEM_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
# Filters whose failure preemption can resolve (their status is Unschedulable, not
# UnschedulableAndUnresolvable); the dry run decides whether it does.
RESOLVABLE = frozenset({NODE_PORTS, NODE_RESOURCES_FIT, SPREAD, AFFINITY})
# What those two say with UnschedulableAndUnresolvable: evicting pods adds no label nor match.
UNRESOLVABLE_REASONS = frozenset({AFFINITY_MISMATCH, SPREAD_MISSING_LABEL})
# Upstream's messages (default_preemption.go, preemption.go).
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming pod"


@dataclass(frozen=True)
class PriorityClassRow:
    """What admission reads of a PriorityClass."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = ""


@dataclass(frozen=True)
class Preemptor:
    """The pod's priority as admission sets it, or why admission would refuse the pod."""

    priority: int = 0
    class_name: str = ""
    policy: str = PREEMPT_LOWER
    refused: str = ""

    def answer(self) -> JSON:
        return {
            "priority": self.priority,
            "priorityClassName": self.class_name,
            "preemptionPolicy": self.policy,
        }


def preemptor_of(spec: Mapping[str, Any], classes: Sequence[PriorityClassRow]) -> Preemptor:
    """Priority admission for a new pod: its class's value and policy, the default's, or 0."""
    name = str(spec.get("priorityClassName") or "")
    by_name = {c.name: c for c in classes}
    found: PriorityClassRow | None = None
    if name:
        found = by_name.get(name)
        if found is None and name in SYSTEM_CLASSES:
            found = PriorityClassRow(name, SYSTEM_CLASSES[name])
        if found is None:
            return Preemptor(
                class_name=name, refused=f"no PriorityClass with name {name} was found"
            )
    else:
        defaults = [c for c in classes if c.global_default]
        found = min(defaults, key=lambda c: c.value) if defaults else None
    policy = (found.preemption_policy if found else "") or str(
        spec.get("preemptionPolicy") or PREEMPT_LOWER
    )
    value = found.value if found else 0
    given = spec.get("priority")
    if isinstance(given, int) and not isinstance(given, bool) and given != value:
        return Preemptor(
            priority=value,
            class_name=found.name if found else "",
            policy=policy,
            refused=f"the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name",
        )
    return Preemptor(priority=value, class_name=found.name if found else "", policy=policy)


@dataclass(frozen=True)
class RunningPod:
    """A bound, unfinished pod: what eviction would give back and how important it is."""

    namespace: str
    name: str
    uid: str
    priority: int
    demand: PodDemand
    labels: Mapping[str, str] = field(default_factory=dict)
    # Seconds since the epoch (creation stands for the start); inf: unknown, counted as now.
    started: float = math.inf
    claims: tuple[str, ...] = ()
    # What the topology filters read of it (None: nothing they select).
    record: PodRecord | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def importance(pod: RunningPod) -> tuple[int, float]:
    """Sort key, most important first (util.MoreImportantPod): priority, then earlier start."""
    return (-pod.priority, pod.started)


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as the preemption reads it."""

    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    allowed: int
    disrupted: frozenset[str] = frozenset()

    def selects(self, pod: RunningPod) -> bool:
        # A nil or empty selector selects nothing here (unlike a label selector elsewhere).
        if pod.namespace != self.namespace or not self.selector:
            return False
        if not (self.selector.get("matchLabels") or self.selector.get("matchExpressions")):
            return False
        return selector_matches(self.selector, pod.labels)


def split_by_budgets(
    pods: Sequence[RunningPod], budgets: Sequence[Budget]
) -> tuple[list[RunningPod], list[RunningPod]]:
    """filterPodsWithPDBViolation: (violating, not violating), each in the given order."""
    allowed = [b.allowed for b in budgets]
    violating: list[RunningPod] = []
    fine: list[RunningPod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for index, budget in enumerate(budgets):
                if not budget.selects(pod) or pod.name in budget.disrupted:
                    continue
                allowed[index] -= 1
                if allowed[index] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


def _usage_without(usage: NodeUsage, pods: Sequence[RunningPod]) -> NodeUsage:
    out = usage.copy()
    for pod in pods:
        for name, value in pod.demand.requests.items():
            out.requested[name] = out.requested.get(name, 0) - value
        out.pods -= pod.demand.pods
        for port in pod.demand.ports:
            if port in out.ports:
                out.ports.remove(port)
    return out


@dataclass
class Victims:
    """What preempting on one node takes: the victims, most important first."""

    node: str
    pods: list[RunningPod]
    violations: int


def select_victims(
    node: Mapping[str, Any],
    demand: PodDemand,
    *,
    priority: int,
    usage: NodeUsage,
    running: Sequence[RunningPod],
    budgets: Sequence[Budget],
    dra_backed: frozenset[str] = frozenset(),
    topology: TopologyLedger | None = None,
) -> Victims | str:
    """SelectVictimsOnNode: the victims on this node, or why preemption does not help here."""
    name = str((node.get("metadata") or {}).get("name") or "")
    potential = sorted((p for p in running if p.priority < priority), key=importance)
    if not potential:
        return NO_VICTIMS
    kept: set[int] = set()

    def fits() -> tuple[str, str]:
        gone = [p for p in potential if id(p) not in kept]
        ledger = NodeLedger({name: _usage_without(usage, gone)}, dra_backed=dra_backed)
        found = ledger.check(node, demand)
        if found[0] or topology is None or not demand.pods:
            return found
        # The topology filters without the victims (their RemovePod extensions).
        return topology.check_without(
            node,
            demand.placement,
            demand.node_filter or NodeFilter(),
            [p.record for p in gone if p.record is not None],
        )

    found = fits()
    if found[0]:
        return f"{found[0]}: {found[1]} (with every lower-priority pod gone)"
    violating, fine = split_by_budgets(potential, budgets)
    victims: list[RunningPod] = []
    violations = 0
    for group, counted in ((violating, True), (fine, False)):
        for pod in group:
            kept.add(id(pod))
            if fits()[0]:
                kept.discard(id(pod))
                victims.append(pod)
                violations += counted
    if violating and fine:
        victims.sort(key=importance)
    return Victims(name, victims, violations)


def _earliest_start(victims: Victims) -> float:
    top = victims.pods[0].priority
    return min(p.started for p in victims.pods if p.priority == top)


def pick_node(candidates: Sequence[Victims]) -> Victims | None:
    """pickOneNodeForPreemption over candidates in name order; ties go to the first."""
    # Each criterion keeps the best-scoring candidates (higher is better), as upstream's score
    # functions do; priorities are shifted by 2^31 so that negative ones add up sensibly.
    criteria: list[Callable[[Victims], float]] = [
        lambda v: -v.violations,
        lambda v: -v.pods[0].priority,
        lambda v: -sum(p.priority + 2**31 for p in v.pods),
        lambda v: -len(v.pods),
        _earliest_start,
    ]
    left = [c for c in candidates if c.pods]
    for score in criteria:
        if len(left) <= 1:
            break
        best = max(score(c) for c in left)
        left = [c for c in left if score(c) == best]
    return left[0] if left else None


# DefaultPreemptionArgs defaults: at least this share of the nodes, or this many, are tried.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
# Nodes whose pods are read at once while candidates are sought.
_NODES_READ = 200


def candidates_wanted(nodes: int) -> int:
    """calculateNumCandidates: 10% of the nodes preemption might help on, at least 100, at most
    all of them."""
    wanted = nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    return min(max(wanted, MIN_CANDIDATE_NODES_ABSOLUTE), nodes)


@dataclass(frozen=True)
class HeldClaim:
    """A claim a victim uses: who holds it (`status.reservedFor` uids) and its devices."""

    consumers: frozenset[str]
    devices: tuple[str, ...]


@dataclass
class PreemptionInputs:
    """What preemption reads of the cluster, read only when a question asks for it."""

    classes: Sequence[PriorityClassRow]
    budgets: Sequence[Budget]
    # (node names, below this priority) -> per node, its running pods of lower priority.
    running: Callable[[Sequence[str], int], Mapping[str, Sequence[RunningPod]]]
    # claim refs ("ns/name") -> who holds each and its devices.
    claims: Callable[[Sequence[str]], Mapping[str, HeldClaim]]


def preempt(
    nodes: Sequence[JSON],
    entries: Sequence[JSON],
    demand: PodDemand,
    *,
    spec: Mapping[str, Any],
    inputs: PreemptionInputs,
    usage: Mapping[str, NodeUsage],
    dra_backed: frozenset[str] = frozenset(),
    topology: TopologyLedger | None = None,
) -> JSON:
    """The `preemption` of an answer for a pod that fits on none of `nodes`.

    `entries` are the answer's node entries (`fits`: the devices fit there; `filter`: the first
    scheduler filter that removed the node).
    """
    preemptor = preemptor_of(spec, inputs.classes)
    out: JSON = {
        "preemptor": preemptor.answer(),
        "node": None,
        "victims": [],
        "pdbViolations": 0,
        "candidates": 0,
        "message": "",
    }
    if preemptor.refused:
        out["message"] = f"the API server would refuse the pod: {preemptor.refused}"
        return out
    if preemptor.policy == NEVER:
        out["message"] = NOT_ELIGIBLE_NEVER
        return out
    by_name = {str((n.get("metadata") or {}).get("name") or ""): n for n in nodes}
    possible = [
        (by_name[entry["node"]], entry)
        for entry in entries
        if entry.get("node") in by_name
        and entry.get("fits")
        and (entry.get("filter") or {}).get("filter", "") in RESOLVABLE
        and (entry.get("filter") or {}).get("reason", "") not in UNRESOLVABLE_REASONS
    ]
    if not possible:
        out["message"] = (
            "preemption will not help: no node fails only for reasons preemption resolves "
            "(a victim's devices never count as free in the scheduler's dry run)"
        )
        return out
    wanted = candidates_wanted(len(possible))
    fine: list[Victims] = []
    violating: list[Victims] = []
    # DryRunPreemption stops once it holds enough candidates, one of them breaking no budget;
    # pods are read a chunk of nodes at a time, so a large cluster reads only what it needs.
    for start in range(0, len(possible), _NODES_READ):
        chunk = possible[start : start + _NODES_READ]
        running = inputs.running([entry["node"] for _, entry in chunk], preemptor.priority)
        for node, entry in chunk:
            found = select_victims(
                node,
                demand,
                priority=preemptor.priority,
                usage=usage.get(entry["node"]) or NodeUsage(),
                running=running.get(entry["node"]) or (),
                budgets=inputs.budgets,
                dra_backed=dra_backed,
                topology=topology,
            )
            if isinstance(found, Victims) and found.pods:
                (violating if found.violations else fine).append(found)
            if fine and len(fine) + len(violating) >= wanted:
                break
        else:
            continue
        break
    candidates = [*fine, *violating]
    out["candidates"] = len(candidates)
    chosen = pick_node(candidates)
    if chosen is None:
        out["message"] = (
            f"preemption will not help: on none of {len(possible)} node(s) does evicting "
            f"lower-priority pods make room"
        )
        return out
    victim_uids = {p.uid for p in chosen.pods}
    held = inputs.claims(sorted({f"{p.namespace}/{c}" for p in chosen.pods for c in p.claims}))
    victims = []
    for pod in chosen.pods:
        refs = [f"{pod.namespace}/{c}" for c in pod.claims]
        freed = [
            device
            for ref in refs
            if ref in held and held[ref].consumers <= victim_uids
            for device in held[ref].devices
        ]
        victims.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "priority": pod.priority,
                "claims": refs,
                "devicesFreed": freed,
            }
        )
    out.update(
        node=chosen.node,
        victims=victims,
        pdbViolations=chosen.violations,
        message=(
            f"fits if {'this pod is' if len(victims) == 1 else f'these {len(victims)} pods are'} "
            f"preempted on node {chosen.node}"
        ),
    )
    return out


def read_inputs() -> PreemptionInputs:
    """PriorityClasses and PodDisruptionBudgets now; pods and claims when first asked for."""
    classes = [
        PriorityClassRow(name, value, default, policy)
        for name, value, default, policy in PriorityClass.objects.order_by("name").values_list(
            "name", "value", "global_default", "preemption_policy"
        )
    ]
    budgets = [
        Budget(namespace, name, selector, allowed, frozenset(disrupted or ()))
        for namespace, name, selector, allowed, disrupted in PodDisruptionBudget.objects.order_by(
            "namespace", "name"
        ).values_list("namespace", "name", "selector", "disruptions_allowed", "disrupted_pods")
    ]
    return PreemptionInputs(classes, budgets, running=running_pods, claims=held_claims)


def _claim_names(resource_claims: Any, statuses: Any) -> tuple[str, ...]:
    names = [
        str(c.get("resourceClaimName")) for c in resource_claims or [] if c.get("resourceClaimName")
    ]
    names += [str(s.get("resourceClaimName")) for s in statuses or [] if s.get("resourceClaimName")]
    return tuple(dict.fromkeys(names))


def running_pods(nodes: Sequence[str], below: int) -> dict[str, list[RunningPod]]:
    """Per node, its bound, unfinished pods of priority lower than `below`."""
    out: dict[str, list[RunningPod]] = {}
    rows = (
        Pod.objects.exclude(phase__in=TERMINAL_PHASES)
        .filter(priority__lt=below)
        .order_by("node_name", "namespace", "name")
    )
    columns = (
        "node_name",
        "namespace",
        "name",
        "uid",
        "priority",
        "cpu_request",
        "memory_request",
        "storage_request",
        "other_requests",
        "host_ports",
        "labels",
        "created_at",
        "resource_claims",
        "claim_statuses",
        "anti_affinity",
    )
    for part in chunks(sorted(set(nodes))):
        for (
            node,
            namespace,
            name,
            uid,
            priority,
            cpu,
            memory,
            storage,
            other,
            ports,
            labels,
            created,
            resource_claims,
            statuses,
            anti,
        ) in rows.filter(node_name__in=part).values_list(*columns):
            requests = {CPU: cpu, MEMORY: memory, EPHEMERAL_STORAGE: storage, **(other or {})}
            demand = PodDemand(
                requests={k: int(v) for k, v in requests.items() if v},
                ports=tuple((str(ip), str(proto), int(port)) for ip, proto, port in ports or []),
            )
            out.setdefault(node, []).append(
                RunningPod(
                    namespace=namespace,
                    name=name,
                    uid=uid,
                    priority=priority,
                    demand=demand,
                    labels=labels or {},
                    started=created.timestamp() if created is not None else math.inf,
                    claims=_claim_names(resource_claims, statuses),
                    record=record_of(namespace, labels or {}, anti or []),
                )
            )
    return out


def held_claims(refs: Sequence[str]) -> dict[str, HeldClaim]:
    """Per claim ref, the uids it is reserved for and its allocated devices."""
    out: dict[str, HeldClaim] = {}
    for part in chunks(list(refs), 200):
        wanted = Q()
        for ref in part:
            namespace, _, name = ref.partition("/")
            wanted |= Q(namespace=namespace, name=name)
        for claim in ResourceClaim.objects.filter(wanted).prefetch_related(
            "reservations", "allocated_devices"
        ):
            out[f"{claim.namespace}/{claim.name}"] = HeldClaim(
                consumers=frozenset(r.consumer_uid for r in claim.reservations.all()),
                devices=tuple(d.key for d in claim.allocated_devices.all()),
            )
    return out
