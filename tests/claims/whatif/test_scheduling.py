"""The scheduler's node filters and extended resources backed by DRA, as what-if applies them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from claims.whatif.extended import implicit_requests
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.service import what_if
from tests.claims.whatif.cluster import DRIVER, NODES, schedulable_for
from tests.claims.whatif.helpers import URL

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "team"},
    "spec": {
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}
    },
}


def pod_yaml(**spec: Any) -> str:
    """A pod using one GPU from a template, with extra spec fields, plus the template."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            **spec,
        },
    }
    return yaml.safe_dump_all([TEMPLATE, pod])


def filters(answer: dict) -> dict[str, str]:
    return {n["node"]: (n.get("filter") or {}).get("filter", "") for n in answer["nodes"]}


def test_each_node_says_which_filter_removed_it(small) -> None:
    """A nodeSelector leaves one node; the others name NodeAffinity, taints or cordon."""
    answer = what_if(pod_yaml(nodeSelector={"pool": "b"}), use_cache=False)
    assert filters(answer) == {
        "node-a": "NodeAffinity",
        "node-b": "",
        "node-c": "TaintToleration",
        "node-d": "NodeUnschedulable",
    }
    assert answer["pods"][0]["node"] == "node-b"


def test_tolerating_the_taint_opens_the_node(small) -> None:
    """A toleration of the NoSchedule taint plus affinity on metadata.name places the pod there."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-c"]}
                        ]
                    }
                ]
            }
        }
    }
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    answer = what_if(pod_yaml(affinity=affinity, tolerations=tolerations), use_cache=False)
    assert answer["pods"][0]["node"] == "node-c"
    assert filters(answer)["node-a"] == "NodeAffinity"


def test_node_affinity_match_expressions(small) -> None:
    """matchExpressions with NotIn keep the nodes whose label differs or is missing."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]}
                ]
            }
        }
    }
    answer = what_if(pod_yaml(affinity=affinity), use_cache=False)
    kept = [n for n, f in filters(answer).items() if not f]
    assert kept == [n for n in schedulable_for() if n != "node-a"]


def test_node_name_binds_the_pod(small) -> None:
    """spec.nodeName leaves only that node; the others fail NodeName (or an earlier filter)."""
    answer = what_if(pod_yaml(nodeName="node-b"), use_cache=False)
    assert answer["pods"][0]["node"] == "node-b"
    assert filters(answer)["node-a"] == "NodeName"


def test_tolerating_unschedulable_allows_a_cordoned_node(small) -> None:
    """A pod tolerating node.kubernetes.io/unschedulable may use a cordoned node."""
    tolerations = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    answer = what_if(pod_yaml(nodeName="node-d", tolerations=tolerations), use_cache=False)
    assert answer["pods"][0]["node"] == "node-d"


@pytest.mark.parametrize(
    ("effect", "removed"), [("NoSchedule", True), ("NoExecute", True), ("PreferNoSchedule", False)]
)
def test_taint_effects(effect: str, removed: bool) -> None:
    """NoSchedule and NoExecute taints remove a node; PreferNoSchedule only scores."""
    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": effect}]}}
    found = NodeFilter.from_pod_spec({}, where="pod").check(node)
    assert (found[0] == "TaintToleration") is removed


def test_extended_resources_get_the_schedulers_claim(small) -> None:
    """Containers asking for example.com/gpu (the class's extendedResourceName) or the
    deviceclass.resource.kubernetes.io form get one implicit claim, a request per container."""
    text = (FIXTURES / "extended-resource.yaml").read_text()
    answer = what_if(text, use_cache=False)
    pod = answer["pods"][0]
    assert pod["pod"] == "extended-gpu/cuda-pod"
    assert pod["fits"] is True
    claim = pod["claims"][0]
    assert claim["claim"] == "extended-gpu/cuda-pod-extended-resources"
    # The init container's GPU is covered by the later long-lived container's.
    assert sorted({d["request"] for d in claim["devices"]}) == [
        "container-1-request-0",
        "container-2-request-0",
    ]


def test_extended_requests_follow_upstream_naming() -> None:
    """Request names use the container index and the resource's index among its sorted names."""
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"memory": "1Gi", "x.io/gpu": "2", "cpu": "1"}}}
        ]
    }
    requests = implicit_requests(spec, mapping={"x.io/gpu": "gpu"}, where="pod")
    assert requests == [
        {
            "name": "container-0-request-2",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        }
    ]


def test_extended_resource_of_an_unknown_class_is_a_400(small, api) -> None:
    """deviceclass.resource.kubernetes.io/<class> naming no class is refused naming it."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"limits": {"deviceclass.resource.kubernetes.io/nope": 1}},
                }
            ]
        },
    }
    response = api.post(URL, {"yaml": yaml.safe_dump(pod)}, format="json")
    assert response.status_code == 400
    assert "resources" in response.json()["field"]
    assert "nope" in response.json()["detail"]


def test_every_node_is_listed_once(small) -> None:
    """The per-node answer covers every node of the cluster."""
    answer = what_if(pod_yaml(), use_cache=False)
    assert [n["node"] for n in answer["nodes"]] == list(NODES)
