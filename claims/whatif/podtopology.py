"""PodTopologySpread and InterPodAffinity: where a pod may go given the pods already placed.

After upstream's plugins (`pkg/scheduler/framework/plugins/podtopologyspread/filtering.go` and
`interpodaffinity/filtering.go`, 1.36), each computed once per pod over every node (the
PreFilter) and then checked node by node (the Filter):

- PodTopologySpread, for each `whenUnsatisfiable: DoNotSchedule` constraint (its labelSelector
  with the pod's `matchLabelKeys` values added): the pods of the pod's namespace it selects are
  counted per value of `topologyKey` over the nodes that carry every constraint's key and that
  the inclusion policies admit (`nodeAffinityPolicy` Honor by default: the pod's nodeSelector and
  required node affinity; `nodeTaintsPolicy` Ignore by default). A node without the key is
  "node(s) didn't match pod topology spread constraints (missing required label)"; one whose
  domain would pass `maxSkew` above the smallest domain (0 when there are fewer domains than
  `minDomains`), counting the pod itself when the selector selects it, is "node(s) didn't match
  pod topology spread constraints". ScheduleAnyway constraints and the cluster's default
  constraints only score: not modelled.
- InterPodAffinity, the required terms only (preferred ones score): every affinity term needs a
  pod matching all of them in the node's domain of its topologyKey, unless no pod anywhere
  matches and the pod matches its own terms (the first of a group): else "node(s) didn't match
  pod affinity rules"; no pod matching an anti-affinity term may run in the node's domain:
  "node(s) didn't match pod anti-affinity rules"; and no running pod's required anti-affinity may
  select the pod within its own domain: "node(s) didn't satisfy existing pods anti-affinity
  rules". A term's namespaces are its `namespaces` and those its `namespaceSelector` selects (by
  the Namespaces' labels known), or the pod's own namespace.

Pods the what-if places count for the pods after them. Terminating pods are counted as running
ones (the dashboard keeps no deletionTimestamp in a pod's projection).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.nodefilter import NodeFilter

JSON = dict[str, Any]

SPREAD = "PodTopologySpread"
AFFINITY = "InterPodAffinity"
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = f"{SPREAD_MISMATCH} (missing required label)"
AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: nil selects nothing, {} everything; matchLabels and
    matchExpressions (In, NotIn, Exists, DoesNotExist) all hold."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = str(expression.get("key") or "")
        values = {str(v) for v in expression.get("values") or []}
        operator = expression.get("operator")
        if operator == "In" and not (key in labels and labels[key] in values):
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _with_label_keys(
    selector: Mapping[str, Any] | None, keys: Iterable[str], labels: Mapping[str, str]
) -> JSON | None:
    """The selector with `key In (the pod's value)` for each of `keys` the pod carries."""
    if selector is None:
        return None
    extra = [
        {"key": key, "operator": "In", "values": [labels[key]]} for key in keys if key in labels
    ]
    if not extra:
        return dict(selector)
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}


@dataclass(frozen=True)
class Term:
    """One required pod (anti-)affinity term, read against the namespace of its own pod."""

    selector: JSON | None
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: JSON | None

    @classmethod
    def read(cls, term: Mapping[str, Any], *, namespace: str, labels: Mapping[str, str]) -> Term:
        selector = _with_label_keys(
            term.get("labelSelector"), term.get("matchLabelKeys") or [], labels
        )
        mismatch = [
            {"key": key, "operator": "NotIn", "values": [labels[key]]}
            for key in term.get("mismatchLabelKeys") or []
            if key in labels
        ]
        if selector is not None and mismatch:
            selector = {
                **selector,
                "matchExpressions": [*(selector.get("matchExpressions") or []), *mismatch],
            }
        names = frozenset(str(n) for n in term.get("namespaces") or [])
        namespace_selector = term.get("namespaceSelector")
        if not names and namespace_selector is None:
            names = frozenset({namespace})
        return cls(
            selector=selector,
            topology_key=str(term.get("topologyKey") or ""),
            namespaces=names,
            namespace_selector=dict(namespace_selector) if namespace_selector is not None else None,
        )

    def selects(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> bool:
        """PodMatchesTermsNamespaceAndSelector."""
        in_scope = namespace in self.namespaces or (
            self.namespace_selector is not None
            and namespace in namespace_labels
            and selector_matches(self.namespace_selector, namespace_labels[namespace])
        )
        return in_scope and selector_matches(self.selector, labels)


def _terms(
    spec: Mapping[str, Any], kind: str, *, namespace: str, labels: Mapping[str, str]
) -> tuple[Term, ...]:
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), Mapping) else {}
    section = (affinity or {}).get(kind)
    if not isinstance(section, Mapping):
        return ()
    required = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return tuple(
        Term.read(t, namespace=namespace, labels=labels) for t in required if isinstance(t, Mapping)
    )


def anti_affinity_terms(spec: Mapping[str, Any]) -> list[JSON]:
    """The required anti-affinity terms of a pod spec, as stored with its projection."""
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), Mapping) else {}
    section = (affinity or {}).get("podAntiAffinity")
    if not isinstance(section, Mapping):
        return []
    required = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return [dict(t) for t in required if isinstance(t, Mapping)]


@dataclass(frozen=True)
class Spread:
    """One DoNotSchedule topology spread constraint of the pod."""

    topology_key: str
    max_skew: int
    min_domains: int
    selector: JSON | None
    honor_affinity: bool
    honor_taints: bool


@dataclass(frozen=True)
class PodRecord:
    """What the topology filters read of a pod: namespace, labels, required anti-affinity."""

    namespace: str
    labels: Mapping[str, str]
    anti_affinity: tuple[Term, ...] = ()


@dataclass(frozen=True)
class Placement:
    """What a pod of the input asks of the pods around it."""

    namespace: str
    labels: Mapping[str, str]
    spread: tuple[Spread, ...] = ()
    affinity: tuple[Term, ...] = ()
    anti_affinity: tuple[Term, ...] = ()

    @classmethod
    def of(cls, spec: Mapping[str, Any], *, namespace: str, labels: Mapping[str, str]) -> Placement:
        spreads = []
        for c in spec.get("topologySpreadConstraints") or []:
            if not isinstance(c, Mapping) or c.get("whenUnsatisfiable") != "DoNotSchedule":
                continue
            spreads.append(
                Spread(
                    topology_key=str(c.get("topologyKey") or ""),
                    max_skew=int(c.get("maxSkew") or 1),
                    min_domains=int(c.get("minDomains") or 1),
                    selector=_with_label_keys(
                        c.get("labelSelector"), c.get("matchLabelKeys") or [], labels
                    ),
                    honor_affinity=(c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                    honor_taints=(c.get("nodeTaintsPolicy") or "Ignore") == "Honor",
                )
            )
        return cls(
            namespace=namespace,
            labels=dict(labels),
            spread=tuple(spreads),
            affinity=_terms(spec, "podAffinity", namespace=namespace, labels=labels),
            anti_affinity=_terms(spec, "podAntiAffinity", namespace=namespace, labels=labels),
        )

    @property
    def empty(self) -> bool:
        return not (self.spread or self.affinity or self.anti_affinity)

    def record(self) -> PodRecord:
        return PodRecord(self.namespace, self.labels, self.anti_affinity)


def record_of(namespace: str, labels: Mapping[str, str], anti_affinity: Sequence[Any]) -> PodRecord:
    """A running pod's record from its projection (labels and stored anti-affinity terms)."""
    terms = tuple(
        Term.read(t, namespace=namespace, labels=labels)
        for t in anti_affinity
        if isinstance(t, Mapping)
    )
    return PodRecord(namespace, dict(labels), terms)


@dataclass
class _PreFilter:
    spread_counts: list[Counter[str]] = field(default_factory=list)
    affinity_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    anti_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    existing_anti: Counter[tuple[str, str]] = field(default_factory=Counter)


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


class TopologyLedger:
    """The pods of every node as the topology filters see them, plus those placed meanwhile.

    `pods` gives, per node name, the records of its bound, unfinished pods (read when a question
    first needs them); `with_anti_affinity` only those that carry required anti-affinity (read
    for every pod placed: a running pod's anti-affinity may refuse it).
    """

    def __init__(
        self,
        nodes: Sequence[JSON],
        *,
        pods: Callable[[], Mapping[str, Sequence[PodRecord]]],
        with_anti_affinity: Callable[[], Mapping[str, Sequence[PodRecord]]],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self._load_all = pods
        self._load_anti = with_anti_affinity
        self._all: Mapping[str, Sequence[PodRecord]] | None = None
        self._anti: Mapping[str, Sequence[PodRecord]] | None = None
        self.namespace_labels = namespace_labels or {}
        self._placed: dict[str, list[PodRecord]] = {}
        self._prefilter: tuple[int, int, _PreFilter] | None = None
        self._version = 0
        self._has_anti: bool | None = None

    def _pods(self, name: str, *, everything: bool) -> list[PodRecord]:
        if everything:
            if self._all is None:
                self._all = self._load_all()
            cluster = list(self._all.get(name, ()))
        else:
            if self._anti is None:
                self._anti = self._load_anti()
            cluster = list(self._anti.get(name, ()))
        placed = self._placed.get(name, [])
        return cluster + (placed if everything else [p for p in placed if p.anti_affinity])

    def _any_anti_affinity(self) -> bool:
        """Whether any pod, running or placed, has required anti-affinity."""
        if self._has_anti is None:
            if self._anti is None:
                self._anti = self._load_anti()
            self._has_anti = any(self._anti.values())
        return self._has_anti

    def place(self, node_name: str, placement: Placement) -> None:
        """Count a pod placed on the node for the pods after it."""
        self._placed.setdefault(node_name, []).append(placement.record())
        self._version += 1
        if placement.anti_affinity:
            self._has_anti = True

    def _computed(self, placement: Placement, node_filter: NodeFilter) -> _PreFilter:
        key = (id(placement), self._version)
        if self._prefilter is not None and self._prefilter[:2] == key:
            return self._prefilter[2]
        state = _PreFilter(spread_counts=[Counter() for _ in placement.spread])
        needs_all = not placement.empty
        keys = {s.topology_key for s in placement.spread}
        for node in self.nodes:
            labels = _labels(node)
            name = _name(node)
            for pod in self._pods(name, everything=False):
                for term in pod.anti_affinity:
                    if term.topology_key in labels and term.selects(
                        placement.namespace, placement.labels, self.namespace_labels
                    ):
                        state.existing_anti[(term.topology_key, labels[term.topology_key])] += 1
            if not needs_all:
                continue
            pods = self._pods(name, everything=True)
            if placement.spread and keys <= set(labels):
                for index, spread in enumerate(placement.spread):
                    if spread.honor_affinity and not node_filter.matches_affinity(node):
                        continue
                    if spread.honor_taints and not node_filter.tolerates_node(node):
                        continue
                    matching = sum(
                        1
                        for pod in pods
                        if pod.namespace == placement.namespace
                        and selector_matches(spread.selector, pod.labels)
                    )
                    state.spread_counts[index][labels[spread.topology_key]] += matching
            for pod in pods:
                if placement.affinity and all(
                    t.selects(pod.namespace, pod.labels, self.namespace_labels)
                    for t in placement.affinity
                ):
                    for term in placement.affinity:
                        if term.topology_key in labels:
                            state.affinity_counts[
                                (term.topology_key, labels[term.topology_key])
                            ] += 1
                for term in placement.anti_affinity:
                    if term.topology_key in labels and term.selects(
                        pod.namespace, pod.labels, self.namespace_labels
                    ):
                        state.anti_counts[(term.topology_key, labels[term.topology_key])] += 1
        self._prefilter = (key[0], key[1], state)
        return state

    def check(
        self, node: Mapping[str, Any], placement: Placement | None, node_filter: NodeFilter
    ) -> tuple[str, str]:
        """(filter, reason) of PodTopologySpread or InterPodAffinity when one removes the node,
        or ("", "")."""
        if placement is None:
            return "", ""
        if placement.empty and not self._any_anti_affinity():
            return "", ""
        return self._verdict(node, placement, self._computed(placement, node_filter))

    def check_without(
        self,
        node: Mapping[str, Any],
        placement: Placement | None,
        node_filter: NodeFilter,
        removed: Sequence[PodRecord],
    ) -> tuple[str, str]:
        """`check` with the `removed` pods of this node gone: what the plugins' RemovePod
        extensions tell preemption's dry run about victims."""
        if placement is None or (placement.empty and not self._any_anti_affinity()):
            return "", ""
        state = self._computed(placement, node_filter)
        if removed:
            state = self._without(state, node, placement, node_filter, removed)
        return self._verdict(node, placement, state)

    def _without(
        self,
        state: _PreFilter,
        node: Mapping[str, Any],
        placement: Placement,
        node_filter: NodeFilter,
        removed: Sequence[PodRecord],
    ) -> _PreFilter:
        """The counts with `removed` (pods of `node`) taken out, as `_computed` counted them."""
        labels = _labels(node)
        out = _PreFilter(
            spread_counts=[Counter(c) for c in state.spread_counts],
            affinity_counts=Counter(state.affinity_counts),
            anti_counts=Counter(state.anti_counts),
            existing_anti=Counter(state.existing_anti),
        )
        keys = {s.topology_key for s in placement.spread}
        spreading = bool(placement.spread) and keys <= set(labels)
        ns = self.namespace_labels
        for pod in removed:
            for term in pod.anti_affinity:
                if term.topology_key in labels and term.selects(
                    placement.namespace, placement.labels, ns
                ):
                    out.existing_anti[(term.topology_key, labels[term.topology_key])] -= 1
            for index, spread in enumerate(placement.spread if spreading else ()):
                if spread.honor_affinity and not node_filter.matches_affinity(node):
                    continue
                if spread.honor_taints and not node_filter.tolerates_node(node):
                    continue
                if pod.namespace == placement.namespace and selector_matches(
                    spread.selector, pod.labels
                ):
                    out.spread_counts[index][labels[spread.topology_key]] -= 1
            if placement.affinity and all(
                t.selects(pod.namespace, pod.labels, ns) for t in placement.affinity
            ):
                for term in placement.affinity:
                    if term.topology_key in labels:
                        out.affinity_counts[(term.topology_key, labels[term.topology_key])] -= 1
            for term in placement.anti_affinity:
                if term.topology_key in labels and term.selects(pod.namespace, pod.labels, ns):
                    out.anti_counts[(term.topology_key, labels[term.topology_key])] -= 1
        # A domain no pod matches any more is no longer counted (upstream deletes it at 0);
        # spread keeps its domains, which still hold nodes.
        out.affinity_counts = +out.affinity_counts
        out.anti_counts = +out.anti_counts
        out.existing_anti = +out.existing_anti
        return out

    def _verdict(
        self, node: Mapping[str, Any], placement: Placement, state: _PreFilter
    ) -> tuple[str, str]:
        labels = _labels(node)
        for index, spread in enumerate(placement.spread):
            if spread.topology_key not in labels:
                return SPREAD, SPREAD_MISSING_LABEL
            counts = state.spread_counts[index]
            minimum = min(counts.values()) if counts else 0
            if len(counts) < spread.min_domains:
                minimum = 0
            self_match = int(selector_matches(spread.selector, placement.labels))
            if counts.get(labels[spread.topology_key], 0) + self_match - minimum > spread.max_skew:
                return SPREAD, SPREAD_MISMATCH
        if placement.affinity:
            exist = True
            for term in placement.affinity:
                if term.topology_key not in labels:
                    return AFFINITY, AFFINITY_MISMATCH
                if state.affinity_counts[(term.topology_key, labels[term.topology_key])] <= 0:
                    exist = False
            if not exist and not (
                not state.affinity_counts
                and all(
                    t.selects(placement.namespace, placement.labels, self.namespace_labels)
                    for t in placement.affinity
                )
            ):
                return AFFINITY, AFFINITY_MISMATCH
        for term in placement.anti_affinity:
            if (
                term.topology_key in labels
                and state.anti_counts[(term.topology_key, labels[term.topology_key])] > 0
            ):
                return AFFINITY, ANTI_AFFINITY_MISMATCH
        if state.existing_anti and any(
            state.existing_anti[(key, value)] > 0 for key, value in labels.items()
        ):
            return AFFINITY, EXISTING_ANTI_AFFINITY
        return "", ""
