"""The scheduler's node filters that what-if can know from a pod spec and the stored nodes.

In the default plugin order, after NodeAffinity's PreFilter (a required affinity whose every term
names nodes with `matchFields` `metadata.name In`, as a DaemonSet's pods have, leaves only those
nodes; the others are "node(s) didn't satisfy plugin(s) [NodeAffinity]"): NodeUnschedulable
(`spec.unschedulable`, unless the pod tolerates the `node.kubernetes.io/unschedulable` taint),
NodeName (`spec.nodeName`), TaintToleration (NoSchedule and NoExecute taints; PreferNoSchedule
only scores), NodeAffinity (`nodeSelector` and the required `nodeSelectorTerms`, terms ORed, with
matchExpressions and matchFields). The first filter that removes a node is reported with
upstream's message (`k8s.io/kubernetes/pkg/scheduler/framework/plugins/*`, 1.36). A node whose
Ready condition is not True is taken to carry the NoSchedule taint the node lifecycle controller
gives it soon after (`node.kubernetes.io/not-ready`, or `unreachable` when the status is
Unknown), checked against the pod's tolerations like any other taint.

NodePorts and NodeResourcesFit, which need what already runs on each node, are `nodefit`'s,
PodTopologySpread and InterPodAffinity `podtopology`'s; DynamicResources is the allocator's. The
filters what-if does not run are listed in every answer (`not_modelled`), never skipped silently.

`fit_error` words the scheduler's summary for a pod no node takes, as FitError.Error() does
(`pkg/scheduler/framework/types.go`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.inputs import JSON, WhatIfError
from dralib.allocator.nodeselection import NodeInfo, NodeSelector

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
# The node lifecycle controller's taints for a Ready condition that is False or Unknown.
_NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
_UNREACHABLE_TAINT = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}

# Upstream's reasons (pkg/scheduler/framework/plugins/<plugin>/*.go, 1.36).
UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME_MISMATCH = "node(s) didn't match the requested node name"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
AFFINITY_CONFLICT = "pod affinity terms conflict"
# schedule_one.go: nodes a PreFilter result leaves out ("%v" of the plugin names).
NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
# A PreFilter rejection fails every node at once and is reported once, not counted.
_PREFILTER_REJECTIONS = frozenset({AFFINITY_CONFLICT})
_NAME_FIELD = "metadata.name"


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Upstream Toleration.ToleratesTaint for the Equal and Exists operators."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


@dataclass
class NodeFilter:
    """A pod's node constraints, checked once per node.

    `node_names` is NodeAffinity's PreFilter result: the only nodes the filters are run on
    (None: all nodes; empty: the affinity's terms conflict).
    """

    node_name: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    tolerations: list[JSON] = field(default_factory=list)
    node_names: frozenset[str] | None = None

    @classmethod
    def from_pod_spec(cls, spec: Mapping[str, Any], *, where: str) -> NodeFilter:
        """Read the filters of a pod spec; malformed ones are a WhatIfError naming the field."""
        node_name = spec.get("nodeName") or ""
        if not isinstance(node_name, str):
            raise WhatIfError(f"{where}: spec.nodeName", "expected a node name")
        selector = spec.get("nodeSelector") or {}
        if not isinstance(selector, Mapping) or not all(
            isinstance(v, str) for v in selector.values()
        ):
            raise WhatIfError(f"{where}: spec.nodeSelector", "expected a map of label to value")
        tolerations = spec.get("tolerations") or []
        if not isinstance(tolerations, list) or not all(
            isinstance(t, Mapping) for t in tolerations
        ):
            raise WhatIfError(f"{where}: spec.tolerations", "expected a list of tolerations")
        affinity = _required_affinity(spec, where=where)
        return cls(
            node_name=node_name,
            node_selector={str(k): v for k, v in selector.items()},
            affinity=affinity,
            tolerations=[dict(t) for t in tolerations],
            node_names=_prefilter_names(affinity),
        )

    def tolerates_all(self, taint: Mapping[str, Any]) -> bool:
        return any(tolerates(t, taint) for t in self.tolerations)

    def matches_affinity(self, node: JSON) -> bool:
        """The pod's nodeSelector and required node affinity admit the node (what
        PodTopologySpread's nodeAffinityPolicy Honor reads)."""
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.affinity is None or self.affinity.matches(
            NodeInfo(name=str(meta.get("name") or ""), labels=dict(labels))
        )

    def tolerates_node(self, node: JSON) -> bool:
        """The pod tolerates every NoSchedule and NoExecute taint of the node."""
        spec = node.get("spec") or {}
        return all(
            self.tolerates_all(taint)
            for taint in (*(spec.get("taints") or []), *_lifecycle_taints(node))
            if taint.get("effect") in _FILTERED_EFFECTS
        )

    def check(self, node: JSON) -> tuple[str, str]:
        """(filter, reason) of the first filter that removes the node, or ("", "")."""
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        name = str(meta.get("name") or "")
        if self.node_names is not None and name not in self.node_names:
            return "NodeAffinity", NOT_IN_PREFILTER if self.node_names else AFFINITY_CONFLICT
        if spec.get("unschedulable") and not self.tolerates_all(UNSCHEDULABLE_TAINT):
            return "NodeUnschedulable", UNSCHEDULABLE
        if self.node_name and self.node_name != name:
            return "NodeName", NODE_NAME_MISMATCH
        for taint in (*(spec.get("taints") or []), *_lifecycle_taints(node)):
            if taint.get("effect") in _FILTERED_EFFECTS and not self.tolerates_all(taint):
                return "TaintToleration", UNTOLERATED_TAINT
        labels = meta.get("labels") or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()) or (
            self.affinity is not None
            and not self.affinity.matches(NodeInfo(name=name, labels=dict(labels)))
        ):
            return "NodeAffinity", AFFINITY_MISMATCH
        return "", ""


def _lifecycle_taints(node: JSON) -> list[Mapping[str, str]]:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return [_NOT_READY_TAINT if condition.get("status") == "False" else _UNREACHABLE_TAINT]
    return []


def _prefilter_names(affinity: NodeSelector | None) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: the nodes named by `matchFields` `metadata.name In` when every
    term names some (within a term their intersection, across terms their union)."""
    if affinity is None:
        return None
    terms = affinity.raw.get("nodeSelectorTerms") or []
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        named: set[str] | None = None
        for requirement in term.get("matchFields") or []:
            if requirement.get("key") == _NAME_FIELD and requirement.get("operator") == "In":
                values = {str(v) for v in requirement.get("values") or []}
                named = values if named is None else named & values
        if named is None:
            return None
        names |= named
    return frozenset(names)


def fit_error(total: int, reasons: Counter[str]) -> str:
    """The scheduler's message for a pod that no node takes, from each node's reason.

    FitError.Error(): "0/N nodes are available:", then the count and reason of each distinct
    reason, sorted as strings (so "26 ..." comes before "3 ..."), joined by ", " and ended
    with "."; a PreFilter rejection instead of the counts. The PostFilter part the scheduler
    appends (" preemption: ..." of DefaultPreemption, DynamicResources' deallocation) is not
    modelled, so not written. With no node at all, the scheduler's ErrNoNodesAvailable.
    """
    if total == 0:
        return "no nodes available to schedule pods"
    message = f"0/{total} nodes are available:"
    rejected = sorted(_PREFILTER_REJECTIONS & set(reasons))
    if rejected:
        return f"{message} {rejected[0]}."
    entries = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
    return f"{message} {', '.join(entries)}." if entries else message


def _required_affinity(spec: Mapping[str, Any], *, where: str) -> NodeSelector | None:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = spec.get("affinity") or {}
    if not isinstance(affinity, Mapping):
        raise WhatIfError(f"{where}: spec.affinity", "expected an object")
    node_affinity = affinity.get("nodeAffinity") or {}
    if not isinstance(node_affinity, Mapping):
        raise WhatIfError(f"{where}: spec.affinity.nodeAffinity", "expected an object")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list) or not all(isinstance(t, Mapping) for t in terms):
        raise WhatIfError(f"{where}: {path}.nodeSelectorTerms", "expected a list of terms")
    for t_index, term in enumerate(terms):
        for key in ("matchExpressions", "matchFields"):
            entries = term.get(key) or []
            if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
                raise WhatIfError(
                    f"{where}: {path}.nodeSelectorTerms[{t_index}].{key}",
                    "expected a list of requirements",
                )
    selector = NodeSelector(dict(required))
    if selector.error:
        raise WhatIfError(f"{where}: {path}", selector.error)
    return selector


def check_all(filters: Sequence[NodeFilter], node: JSON) -> tuple[str, str]:
    """The first (filter, reason) of any of the filters, or ("", "")."""
    for node_filter in filters:
        result = node_filter.check(node)
        if result[0]:
            return result
    return "", ""


# The default profile's filters (and its PostFilter) what-if does not run, in the scheduler's order.
NOT_MODELLED: tuple[tuple[str, str, str], ...] = (
    ("SchedulerFilter", "VolumeRestrictions", "volume conflicts on a node are not checked"),
    ("SchedulerFilter", "NodeVolumeLimits", "CSI volume attach limits are not checked"),
    ("SchedulerFilter", "VolumeBinding", "PersistentVolumeClaims are not bound or checked"),
    ("SchedulerFilter", "VolumeZone", "the zones of volumes are not checked"),
    (
        "SchedulerPostFilter",
        "DefaultPreemption",
        "only with `preemption: true` (then nominated pods are not modelled)",
    ),
    (
        "SchedulerProfile",
        "other plugins",
        "scheduler profiles, extenders and out-of-tree plugins are not known",
    ),
)


def not_modelled(*, unknown_capacity: Sequence[str] = ()) -> list[JSON]:
    """The answer's `ignored` entries for the scheduler's plugins what-if does not run, and for
    nodes whose capacity it could not check (no `status.allocatable`)."""
    out: list[JSON] = [
        {"document": "", "kind": kind, "name": name, "reason": f"not modelled: {reason}"}
        for kind, name, reason in NOT_MODELLED
    ]
    if unknown_capacity:
        shown = ", ".join(unknown_capacity[:5]) + (", ..." if len(unknown_capacity) > 5 else "")
        out.append(
            {
                "document": "",
                "kind": "SchedulerFilter",
                "name": "NodeResourcesFit",
                "reason": f"not applied to {len(unknown_capacity)} node(s) without "
                f"status.allocatable: {shown}",
            }
        )
    return out
