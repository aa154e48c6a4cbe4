"""The scheduler's node filters that what-if can know from a pod spec and the stored nodes.

In the default plugin order: NodeUnschedulable (`spec.unschedulable`, unless the pod tolerates
the `node.kubernetes.io/unschedulable` taint), NodeName (`spec.nodeName`), TaintToleration
(NoSchedule and NoExecute taints; PreferNoSchedule only scores), NodeAffinity (`nodeSelector` and
the required `nodeSelectorTerms`, terms ORed, with matchExpressions and matchFields). The first
filter that removes a node is reported with upstream's message. A node whose Ready condition is
not True is also kept out (the node lifecycle controller taints it soon after).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.inputs import JSON, WhatIfError
from dralib.allocator.nodeselection import NodeInfo, NodeSelector

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


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
    """A pod's node constraints, checked once per node."""

    node_name: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    tolerations: list[JSON] = field(default_factory=list)

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
        )

    def tolerates_all(self, taint: Mapping[str, Any]) -> bool:
        return any(tolerates(t, taint) for t in self.tolerations)

    def check(self, node: JSON) -> tuple[str, str]:
        """(filter, reason) of the first filter that removes the node, or ("", "")."""
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        name = str(meta.get("name") or "")
        if spec.get("unschedulable") and not self.tolerates_all(UNSCHEDULABLE_TAINT):
            return "NodeUnschedulable", "node(s) were unschedulable"
        if self.node_name and self.node_name != name:
            return "NodeName", "node(s) didn't match the requested node name"
        for taint in spec.get("taints") or []:
            if taint.get("effect") in _FILTERED_EFFECTS and not self.tolerates_all(taint):
                return "TaintToleration", (
                    f"node(s) had untolerated taint {{{taint.get('key')}: "
                    f"{taint.get('value') or ''}}}"
                )
        labels = meta.get("labels") or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()) or (
            self.affinity is not None
            and not self.affinity.matches(NodeInfo(name=name, labels=dict(labels)))
        ):
            return "NodeAffinity", "node(s) didn't match Pod's node affinity/selector"
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") != "True":
                return "NodeReady", "node(s) were not ready"
        return "", ""


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
