"""PodTopologySpread (DoNotSchedule) and InterPodAffinity (required terms), node by node.

The spread cases are upstream's `podtopologyspread/filtering_test.go` TestSingleConstraint and
TestMultipleConstraints, as data: the pod's constraints and labels, the nodes' labels, where the
running pods are, and which nodes pass ("terminating Pods should be excluded" needs a
deletionTimestamp, which a pod's projection does not keep). The affinity cases follow
`interpodaffinity/filtering_test.go`'s rules: affinity needs a matching pod in the domain (or
none anywhere and the pod matching itself), anti-affinity none, and running pods' anti-affinity
must not select the pod.
"""

from __future__ import annotations

from typing import Any

import pytest

from claims.whatif.nodefilter import NodeFilter
from claims.whatif.podtopology import (
    AFFINITY,
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY,
    SPREAD,
    SPREAD_MISMATCH,
    SPREAD_MISSING_LABEL,
    Placement,
    TopologyLedger,
    record_of,
    selector_matches,
)

NS = "default"
FOUR = {
    "node-a": {"zone": "zone1", "node": "node-a"},
    "node-b": {"zone": "zone1", "node": "node-b"},
    "node-x": {"zone": "zone2", "node": "node-x"},
    "node-y": {"zone": "zone2", "node": "node-y"},
}
EXISTS_FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
SPREAD_2103 = {"node-a": 2, "node-b": 1, "node-y": 3}


def spread(key: str, skew: int = 1, selector: dict | None = None) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector if selector is not None else EXISTS_FOO,
    }


def nodes_of(labels: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [{"metadata": {"name": name, "labels": lab}} for name, lab in labels.items()]


def ledger(
    nodes: dict[str, dict[str, str]],
    pods: dict[str, list[tuple[str, dict[str, str], list]]],
) -> TopologyLedger:
    """Running pods per node as (namespace, labels, anti-affinity terms)."""
    records = {node: [record_of(*pod) for pod in entries] for node, entries in pods.items()}
    anti = {node: [r for r in rs if r.anti_affinity] for node, rs in records.items()}
    return TopologyLedger(nodes_of(nodes), pods=lambda: records, with_anti_affinity=lambda: anti)


def foo_pods(counts: dict[str, int], namespace: str = NS) -> dict[str, list]:
    return {node: [(namespace, {"foo": ""}, [])] * n for node, n in counts.items()}


def passing(
    book: TopologyLedger,
    nodes: dict[str, dict[str, str]],
    spec: dict,
    labels: dict[str, str],
    node_filter: NodeFilter | None = None,
) -> dict[str, tuple[str, str]]:
    placement = Placement.of(spec, namespace=NS, labels=labels)
    return {
        name: book.check(node, placement, node_filter or NodeFilter())
        for name, node in zip(nodes, nodes_of(nodes), strict=True)
    }


OK = ("", "")
NO = (SPREAD, SPREAD_MISMATCH)
MISSING = (SPREAD, SPREAD_MISSING_LABEL)

# (name, constraints, pod labels, nodes, running pods, verdict per node)
SPREAD_CASES = [
    ("no existing pods", [spread("zone")], {"foo": ""}, FOUR, {}, dict.fromkeys(FOUR, OK)),
    (
        "no existing pods, incoming pod doesn't match itself",
        [spread("zone", selector={"matchExpressions": [{"key": "bar", "operator": "Exists"}]})],
        {"foo": ""},
        FOUR,
        {},
        dict.fromkeys(FOUR, OK),
    ),
    (
        "existing pods in a different namespace do not count",
        [spread("zone")],
        {"foo": ""},
        FOUR,
        {
            "node-a": [("ns1", {"foo": ""}, []), ("ns2", {"foo": ""}, [])],
            **foo_pods({"node-x": 1, "node-y": 1}),
        },
        {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO},
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        [spread("zone")],
        {"foo": ""},
        FOUR,
        foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}),
        dict.fromkeys(FOUR, OK),
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        [spread("zone")],
        {"foo": ""},
        {**FOUR, "node-b": {"zon": "zone1", "node": "node-b"}},
        foo_pods({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}),
        {"node-a": OK, "node-b": MISSING, "node-x": NO, "node-y": NO},
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        [spread("rack")],
        {"foo": ""},
        {"node-a": FOUR["node-a"], "node-x": FOUR["node-x"]},
        {},
        {"node-a": MISSING, "node-x": MISSING},
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        [spread("node")],
        {"foo": ""},
        FOUR,
        foo_pods(SPREAD_2103),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        [spread("node", skew=2)],
        {"foo": ""},
        FOUR,
        foo_pods(SPREAD_2103),
        {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO},
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        [spread("node")],
        {"bar": ""},
        FOUR,
        foo_pods(SPREAD_2103),
        {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO},
    ),
    (
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        [spread("zone"), spread("node")],
        {"foo": ""},
        FOUR,
        foo_pods(SPREAD_2103),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
    ),
]


@pytest.mark.parametrize(
    ("constraints", "labels", "nodes", "pods", "verdicts"),
    [c[1:] for c in SPREAD_CASES],
    ids=[c[0] for c in SPREAD_CASES],
)
def test_pod_topology_spread(
    constraints: list, labels: dict, nodes: dict, pods: dict, verdicts: dict
) -> None:
    """A domain passing maxSkew above the smallest fails; a node without the key cannot count."""
    book = ledger(nodes, pods)
    spec = {"topologySpreadConstraints": constraints}
    assert passing(book, nodes, spec, labels) == verdicts


def test_spread_honors_the_pods_node_affinity() -> None:
    """Only nodes the pod's node affinity admits count (nodeAffinityPolicy Honor): with node-a
    and node-y alone the spread is 2/3, so node-a fits (upstream's "hence node-a fits")."""
    book = ledger(FOUR, foo_pods(SPREAD_2103))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}
                        ]
                    }
                ]
            }
        }
    }
    spec = {"topologySpreadConstraints": [spread("node")], "affinity": affinity}
    node_filter = NodeFilter.from_pod_spec(spec, where="pod")
    verdicts = passing(book, FOUR, spec, {"foo": ""}, node_filter)
    assert verdicts["node-a"] == OK and verdicts["node-y"] == NO


def test_min_domains_treats_the_minimum_as_zero() -> None:
    """With fewer domains than minDomains the global minimum is 0: 1/1 over two zones with
    minDomains 3 leaves no zone below maxSkew 1 for a self-matching pod."""
    book = ledger(FOUR, foo_pods({"node-a": 1, "node-x": 1}))
    constraint = {**spread("zone"), "minDomains": 3}
    verdicts = passing(book, FOUR, {"topologySpreadConstraints": [constraint]}, {"foo": ""})
    assert set(verdicts.values()) == {NO}


def term(key: str, selector: dict, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, **extra}


def affinity(kind: str, *terms: dict) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}


APP_DB = {"matchLabels": {"app": "db"}}


def test_pod_affinity_needs_a_matching_pod_in_the_domain() -> None:
    """A web pod wanting to share a zone with a db pod: only zone2's nodes pass."""
    book = ledger(FOUR, {"node-y": [(NS, {"app": "db"}, [])]})
    spec = affinity("podAffinity", term("zone", APP_DB))
    verdicts = passing(book, FOUR, spec, {"app": "web"})
    assert verdicts == {
        "node-a": (AFFINITY, AFFINITY_MISMATCH),
        "node-b": (AFFINITY, AFFINITY_MISMATCH),
        "node-x": OK,
        "node-y": OK,
    }


def test_the_first_pod_of_a_group_may_match_itself() -> None:
    """No pod anywhere matches and the pod matches its own terms: it may go anywhere."""
    book = ledger(FOUR, {})
    spec = affinity("podAffinity", term("zone", APP_DB))
    assert set(passing(book, FOUR, spec, {"app": "db"}).values()) == {OK}
    assert set(passing(book, FOUR, spec, {"app": "web"}).values()) == {
        (AFFINITY, AFFINITY_MISMATCH)
    }


def test_pod_affinity_reads_the_terms_namespaces() -> None:
    """A matching pod of another namespace counts only when the term names that namespace."""
    book = ledger(FOUR, {"node-y": [("data", {"app": "db"}, [])]})
    local = affinity("podAffinity", term("zone", APP_DB))
    there = affinity("podAffinity", term("zone", APP_DB, namespaces=["data"]))
    assert passing(book, FOUR, local, {"app": "web"})["node-y"] == (AFFINITY, AFFINITY_MISMATCH)
    assert passing(book, FOUR, there, {"app": "web"})["node-y"] == OK


def test_pod_anti_affinity_keeps_the_pod_out_of_the_domain() -> None:
    """One web pod per node: nodes already running one are refused."""
    book = ledger(FOUR, {"node-a": [(NS, {"app": "web"}, [])]})
    spec = affinity("podAntiAffinity", term("node", {"matchLabels": {"app": "web"}}))
    verdicts = passing(book, FOUR, spec, {"app": "web"})
    assert verdicts["node-a"] == (AFFINITY, ANTI_AFFINITY_MISMATCH)
    assert verdicts["node-b"] == OK


def test_running_pods_anti_affinity_refuses_the_pod() -> None:
    """A running pod that wants no web pod in its zone refuses both nodes of that zone."""
    anti = [term("zone", {"matchLabels": {"app": "web"}})]
    book = ledger(FOUR, {"node-x": [(NS, {"app": "batch"}, anti)]})
    verdicts = passing(book, FOUR, {}, {"app": "web"})
    assert verdicts == {
        "node-a": OK,
        "node-b": OK,
        "node-x": (AFFINITY, EXISTING_ANTI_AFFINITY),
        "node-y": (AFFINITY, EXISTING_ANTI_AFFINITY),
    }


def test_placed_pods_count_for_the_next() -> None:
    """Replicas with hostname-like anti-affinity: each placed one refuses its node to the next."""
    book = ledger(FOUR, {})
    spec = affinity("podAntiAffinity", term("node", {"matchLabels": {"app": "web"}}))
    placement = Placement.of(spec, namespace=NS, labels={"app": "web"})
    nodes = nodes_of(FOUR)
    taken = []
    for _ in range(5):
        free = [n for n in nodes if book.check(n, placement, NodeFilter()) == OK]
        if not free:
            break
        name = free[0]["metadata"]["name"]
        taken.append(name)
        book.place(name, placement)
    assert taken == ["node-a", "node-b", "node-x", "node-y"]


def test_label_selectors() -> None:
    """nil selects nothing, {} everything; In, NotIn, Exists and DoesNotExist."""
    labels = {"app": "web", "tier": "front"}
    assert not selector_matches(None, labels)
    assert selector_matches({}, labels)
    assert selector_matches(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "zone", "operator": "DoesNotExist"},
                {"key": "app", "operator": "NotIn", "values": ["db"]},
            ],
        },
        labels,
    )
    assert not selector_matches({"matchExpressions": [{"key": "x", "operator": "Exists"}]}, labels)
