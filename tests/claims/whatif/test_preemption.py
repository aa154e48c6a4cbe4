"""Preemption on request, as kube-scheduler's DefaultPreemption picks the node and the victims.

The node-picking cases are upstream's own table (`TestPickOneNodeForPreemption` in
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go): nodes of 5 "small"
units (500m cpu, 1000Mi), running pods of 1, 2 or 3 units (small, medium, large) at priorities
-100, 0, 100, 1000; the pod asks for 3 or 5 units at 1000 or 10000. Where upstream accepts any of
several nodes, what-if's deterministic answer is the first in name order.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from claims.whatif.nodefit import PodDemand
from claims.whatif.preemption import (
    Budget,
    RunningPod,
    pick_node,
    split_by_budgets,
)
from claims.whatif.service import what_if
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.helpers import URL
from tests.claims.whatif.preemption_objects import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    NEG,
    SMALL,
    VERY_LARGE,
    ask,
    asking,
    cluster,
    node,
    priority_class,
    running,
)
from tests.claims.whatif.test_answer_schema import _errors

# (name, nodes, the pod's units and class, running pods (name, node, units, priority), node)
PICK_TABLE = [
    (
        "No node needs preemption",
        1,
        (LARGE, "high"),
        [("m1.1", 1, SMALL, MID)],
        None,
    ),
    (
        "a pod that fits on both machines when lower priority pods are preempted",
        2,
        (LARGE, "high"),
        [("m1.1", 1, LARGE, MID), ("m2.1", 2, LARGE, MID)],
        "machine1",
    ),
    (
        "machine with min highest priority pod is picked",
        3,
        (VERY_LARGE, "high"),
        [
            ("m1.1", 1, MEDIUM, MID),
            ("m1.2", 1, LARGE, MID),
            ("m2.1", 2, MEDIUM, MID),
            ("m2.2", 2, MEDIUM, LOW),
            ("m3.1", 3, MEDIUM, LOW),
            ("m3.2", 3, MEDIUM, LOW),
        ],
        "machine3",
    ),
    (
        "when highest priorities are the same, minimum sum of priorities is picked",
        3,
        (VERY_LARGE, "high"),
        [
            ("m1.1", 1, MEDIUM, MID),
            ("m1.2", 1, LARGE, MID),
            ("m2.1", 2, LARGE, MID),
            ("m2.2", 2, MEDIUM, LOW),
            ("m3.1", 3, MEDIUM, MID),
            ("m3.2", 3, MEDIUM, MID),
        ],
        "machine2",
    ),
    (
        "when highest priority and sum are the same, minimum number of pods is picked",
        3,
        (VERY_LARGE, "high"),
        [
            ("m1.1", 1, SMALL, MID),
            ("m1.2", 1, SMALL, NEG),
            ("m1.3", 1, SMALL, MID),
            ("m1.4", 1, SMALL, NEG),
            ("m2.1", 2, LARGE, MID),
            ("m2.2", 2, MEDIUM, NEG),
            ("m3.1", 3, MEDIUM, MID),
            ("m3.2", 3, SMALL, NEG),
            ("m3.3", 3, SMALL, LOW),
        ],
        "machine2",
    ),
    (
        "sum of adjusted priorities is considered",
        3,
        (VERY_LARGE, "high"),
        [
            ("m1.1", 1, SMALL, MID),
            ("m1.2", 1, SMALL, NEG),
            ("m1.3", 1, SMALL, NEG),
            ("m2.1", 2, LARGE, MID),
            ("m2.2", 2, MEDIUM, NEG),
            ("m3.1", 3, MEDIUM, MID),
            ("m3.2", 3, SMALL, NEG),
            ("m3.3", 3, SMALL, LOW),
        ],
        "machine2",
    ),
    (
        "non-overlapping lowest high priority, sum priorities, and number of pods",
        4,
        (VERY_LARGE, "very-high"),
        [
            ("m1.1", 1, SMALL, MID),
            ("m1.2", 1, SMALL, LOW),
            ("m1.3", 1, SMALL, LOW),
            ("m2.1", 2, LARGE, HIGH),
            ("m3.1", 3, MEDIUM, MID),
            ("m3.2", 3, SMALL, LOW),
            ("m3.3", 3, SMALL, LOW),
            ("m3.4", 3, MEDIUM, LOW),
            ("m4.1", 4, MEDIUM, MID),
            ("m4.2", 4, SMALL, MID),
            ("m4.3", 4, SMALL, MID),
            ("m4.4", 4, SMALL, NEG),
        ],
        "machine1",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "nodes", "wanted", "pods", "expected"), PICK_TABLE, ids=[c[0] for c in PICK_TABLE]
)
def test_pick_one_node_for_preemption(name, nodes, wanted, pods, expected) -> None:
    """The node upstream's table expects (None: the pod fits without preempting anyone)."""
    cluster(nodes, [running(n, f"machine{m}", u, p) for n, m, u, p in pods])
    answer = ask(asking(*wanted))
    if expected is None:
        assert answer["fits"] is True and "preemption" not in answer
        return
    assert answer["fits"] is False
    preemption = answer["preemption"]
    assert preemption["node"] == expected, preemption
    on_node = {n for n, m, _, _ in pods if f"machine{m}" == expected}
    assert {v["name"] for v in preemption["victims"]} <= on_node
    assert preemption["message"].startswith("fits if th")
    assert preemption["message"].endswith(f"preempted on node {expected}")


@pytest.mark.django_db
def test_minimal_victims_are_chosen_and_higher_priority_pods_stay() -> None:
    """Only as many lower-priority pods go as make room, the least important first; a pod of
    equal or higher priority is never a victim."""
    cluster(
        1,
        [
            running("keep-high", "machine1", SMALL, HIGH),
            running("mid-old", "machine1", SMALL, MID, started="2026-01-01T00:00:00Z"),
            running("mid-new", "machine1", SMALL, MID, started="2026-02-01T00:00:00Z"),
            running("low", "machine1", SMALL, LOW),
            running("neg", "machine1", SMALL, NEG),
        ],
    )
    answer = ask(asking(LARGE, "high"))
    victims = answer["preemption"]["victims"]
    # Room for 3 units takes 3 of the 4 lower pods: the most important one (earlier start at
    # equal priority) is reprieved.
    assert [v["name"] for v in victims] == ["mid-new", "low", "neg"]
    assert [v["priority"] for v in victims] == [MID, LOW, NEG]
    assert answer["preemption"]["pdbViolations"] == 0
    assert answer["preemption"]["preemptor"] == {
        "priority": HIGH,
        "priorityClassName": "high",
        "preemptionPolicy": "PreemptLowerPriority",
    }


@pytest.mark.django_db
def test_later_start_of_the_highest_victims_breaks_a_tie() -> None:
    """Same priorities and counts: the node whose highest-priority victims started last wins."""
    cluster(
        2,
        [
            running("m1.1", "machine1", LARGE, MID, started="2026-01-01T00:00:00Z"),
            running("m2.1", "machine2", LARGE, MID, started="2026-03-01T00:00:00Z"),
        ],
    )
    assert ask(asking(LARGE))["preemption"]["node"] == "machine2"


def budget(name: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-pdb-{name}"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }


@pytest.mark.django_db
def test_node_without_budget_violations_is_preferred() -> None:
    """Upstream's first criterion: a node whose victims break no PodDisruptionBudget wins over
    one with lower-priority victims that would."""
    cluster(
        2,
        [
            running("guarded", "machine1", LARGE, LOW, labels={"app": "db"}),
            running("free", "machine2", LARGE, MID, labels={"app": "web"}),
        ],
        budget("db", "db", 0),
    )
    answer = ask(asking(LARGE))
    assert answer["preemption"]["node"] == "machine2"
    assert answer["preemption"]["pdbViolations"] == 0


@pytest.mark.django_db
def test_budget_violating_pods_are_reprieved_first_and_counted() -> None:
    """On the only node, pods a budget protects are reprieved before the others; when one must
    still go, the answer counts the violation."""
    cluster(
        1,
        [
            running("db-0", "machine1", MEDIUM, LOW, labels={"app": "db"}),
            running("db-1", "machine1", MEDIUM, LOW, labels={"app": "db"}),
            running("web", "machine1", SMALL, MID, labels={"app": "web"}),
        ],
        budget("db", "db", 1),
    )
    answer = ask(asking(VERY_LARGE))
    assert answer["preemption"]["node"] == "machine1"
    assert {v["name"] for v in answer["preemption"]["victims"]} == {"db-0", "db-1", "web"}
    assert answer["preemption"]["pdbViolations"] == 1


def test_split_by_budgets_counts_each_budget_down() -> None:
    """filterPodsWithPDBViolation: a budget allowing one disruption lets the first pod go and
    flags the second; pods already disrupted or without labels are never violating."""
    pods = [
        RunningPod("ns", "a", "u1", 0, demand=_demand(), labels={"app": "x"}),
        RunningPod("ns", "b", "u2", 0, demand=_demand(), labels={"app": "x"}),
        RunningPod("ns", "c", "u3", 0, demand=_demand(), labels={"app": "x"}),
        RunningPod("ns", "d", "u4", 0, demand=_demand(), labels={}),
    ]
    budgets = [Budget("ns", "x", {"matchLabels": {"app": "x"}}, 1, frozenset({"c"}))]
    violating, fine = split_by_budgets(pods, budgets)
    assert [p.name for p in violating] == ["b"]
    assert [p.name for p in fine] == ["a", "c", "d"]
    empty = [Budget("ns", "all", {}, 0)]
    assert split_by_budgets(pods, empty)[0] == []


def _demand() -> PodDemand:
    return PodDemand(requests={"cpu": 100})


def test_pick_node_of_nothing_is_none() -> None:
    """No candidate, no node."""
    assert pick_node([]) is None


@pytest.mark.django_db
def test_policy_never_and_unknown_class_preempt_nobody() -> None:
    """preemptionPolicy Never (from its class) is upstream's "not eligible"; a class that does
    not exist is refused as admission refuses it."""
    cluster(
        1,
        [running("m1.1", "machine1", LARGE, LOW)],
        priority_class("polite", HIGH, preemptionPolicy="Never"),
    )
    polite = ask(asking(LARGE, "polite"))["preemption"]
    assert polite["node"] is None
    assert polite["message"] == "not eligible due to preemptionPolicy=Never."
    assert polite["preemptor"]["preemptionPolicy"] == "Never"
    missing = ask(asking(LARGE, "nope"))["preemption"]
    assert missing["node"] is None
    assert "no PriorityClass with name nope was found" in missing["message"]


@pytest.mark.django_db
def test_global_default_gives_a_pod_without_class_its_priority() -> None:
    """Without priorityClassName the global default class's value applies (the lowest of
    several defaults); without one, 0 (and equal priority preempts nobody)."""
    cluster(1, [running("m1.1", "machine1", LARGE, MID)])
    unnamed = asking(LARGE)
    del unnamed["spec"]["priorityClassName"]
    nobody = ask(unnamed)["preemption"]
    assert nobody["preemptor"]["priority"] == 0 and nobody["node"] is None
    load_objects(
        [
            priority_class("default-a", 5000, globalDefault=True),
            priority_class("default-b", 2000, globalDefault=True),
        ]
    )
    chosen = ask(unnamed)["preemption"]
    assert chosen["preemptor"] == {
        "priority": 2000,
        "priorityClassName": "default-b",
        "preemptionPolicy": "PreemptLowerPriority",
    }
    assert chosen["node"] == "machine1"


@pytest.mark.django_db
def test_unresolvable_nodes_are_no_candidates() -> None:
    """A node the pod's taints, affinity or nodeName rule out is UnschedulableAndUnresolvable:
    evicting its pods would not help, and the answer says preemption does not help."""
    load_objects(
        [
            priority_class("high", HIGH),
            node("tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            running("low-1", "tainted", VERY_LARGE, LOW),
        ]
    )
    preemption = ask(asking(LARGE))["preemption"]
    assert preemption["node"] is None and preemption["candidates"] == 0
    assert preemption["message"].startswith("preemption will not help")


@pytest.mark.django_db
def test_answer_without_the_option_has_no_preemption() -> None:
    """Only asked for: the same question without `preemption` answers as before."""
    cluster(1, [running("m1.1", "machine1", LARGE, LOW)])
    answer = what_if(yaml.safe_dump(asking(LARGE)), use_cache=False)
    assert answer["fits"] is False and "preemption" not in answer


@pytest.mark.django_db
def test_deployment_over_the_api_matches_the_schema(api, tmp_path) -> None:
    """A Deployment-shaped YAML with `preemption: true` over the REST API: its first pod's
    answer names the node and the victims, and the answer validates against the published
    WhatIfAnswer schema."""
    cluster(
        2,
        [
            running("batch-1", "machine1", LARGE, LOW, namespace="batch"),
            running("batch-2", "machine2", LARGE, MID, namespace="batch"),
        ],
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "urgent", "namespace": "team"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "urgent"}},
            "template": {
                "metadata": {"labels": {"app": "urgent"}},
                "spec": asking(LARGE)["spec"],
            },
        },
    }
    response = api.post(
        URL, {"yaml": yaml.safe_dump(deployment), "preemption": True}, format="json"
    )
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["preemption"]["node"] == "machine1"
    assert answer["preemption"]["victims"] == [
        {
            "namespace": "batch",
            "name": "batch-1",
            "priority": LOW,
            "claims": [],
            "devicesFreed": [],
        }
    ]
    path = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    assert _errors(json.loads(path.read_text()), "WhatIfAnswer", answer) == []
    bad = api.post(URL, {"yaml": yaml.safe_dump(deployment), "preemption": "maybe"}, format="json")
    assert bad.status_code == 400
    assert "preemption" in bad.content.decode()


@pytest.mark.django_db
def test_a_pod_quota_refuses_is_not_preempted_for() -> None:
    """Quota admission refuses the pod before the scheduler sees it: no victims, and the
    preemption says why."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "tight", "namespace": "team", "uid": "uid-quota"},
        "spec": {"hard": {"requests.cpu": "100m"}},
        "status": {"hard": {"requests.cpu": "100m"}, "used": {"requests.cpu": "0"}},
    }
    cluster(1, [running("m1.1", "machine1", LARGE, LOW)], quota)
    preemption = ask(asking(LARGE), namespace="team")["preemption"]
    assert preemption["node"] is None and preemption["victims"] == []
    assert preemption["message"].startswith("the API server would refuse the pod first")


@pytest.mark.django_db
def test_anti_affinity_to_a_lower_priority_pod_is_resolved_by_preempting_it() -> None:
    """InterPodAffinity's RemovePod: the pod refuses nodes running `app: web`; on each node a
    low-priority web pod is the only victim needed, the other low pods stay."""
    cluster(
        2,
        [
            running("web-1", "machine1", SMALL, LOW, labels={"app": "web"}),
            running("batch-1", "machine1", SMALL, NEG, labels={"app": "batch"}),
            running("web-2", "machine2", SMALL, MID, labels={"app": "web"}),
        ],
        *(
            {
                **node(f"machine{i}"),
                "metadata": {
                    "name": f"machine{i}",
                    "uid": f"uid-machine{i}",
                    "labels": {"kubernetes.io/hostname": f"machine{i}"},
                },
            }
            for i in (1, 2)
        ),
    )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    answer = ask(asking(SMALL, affinity=anti))
    assert {e["filter"]["filter"] for e in answer["nodes"]} == {"InterPodAffinity"}
    preemption = answer["preemption"]
    # machine1's web pod has the lower priority: the node with the lowest highest victim.
    assert preemption["node"] == "machine1"
    assert [v["name"] for v in preemption["victims"]] == ["web-1"]
