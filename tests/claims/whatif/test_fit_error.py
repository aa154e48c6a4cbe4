"""The scheduler's summary for a pod no node takes, in its words and order, for one pod or many.

Expected lines follow kube-scheduler 1.36: FitError.Error() (pkg/scheduler/framework/types.go)
counts each node's reason and sorts the "<count> <reason>" strings; the reasons are the
plugins' own (nodeunschedulable, tainttoleration, nodeaffinity, dynamicresources) and
schedule_one.go's for nodes a PreFilter result leaves out. The PostFilter part the scheduler
appends (" preemption: ...") is not modelled and not written.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from claims.whatif.nodefilter import NodeFilter, fit_error
from claims.whatif.service import what_if
from tests.claims.whatif.cluster import DRIVER
from tests.claims.whatif.test_scheduling import TEMPLATE, pod_yaml

FIXTURES = Path(__file__).parent / "fixtures"


def test_reasons_are_sorted_as_strings_like_the_scheduler() -> None:
    """The message a 1.36 cluster printed for 30 nodes: "26 ..." sorts before "3 ..."."""
    reasons = Counter(
        {
            "node(s) had untolerated taint(s)": 3,
            "cannot allocate all claims": 26,
            "node(s) were unschedulable": 1,
        }
    )
    assert fit_error(30, reasons) == (
        "0/30 nodes are available: 1 node(s) were unschedulable, 26 cannot allocate all claims, "
        "3 node(s) had untolerated taint(s)."
    )


def test_no_nodes_at_all() -> None:
    """Without nodes the scheduler says ErrNoNodesAvailable."""
    assert fit_error(0, Counter()) == "no nodes available to schedule pods"


def test_a_single_pod_answer_starts_with_the_summary(small) -> None:
    """One pod wanting three GPUs (nodes have two): the answer's first reason is the line the
    pod's PodScheduled condition would carry, followed by the what-if's per-node detail."""
    three = yaml.safe_load_all(pod_yaml())
    template, pod = list(three)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"].update(
        allocationMode="ExactCount", count=3
    )
    answer = what_if(yaml.safe_dump_all([template, pod]), use_cache=False)
    assert answer["fits"] is False
    summary = (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable, 2 cannot allocate all claims."
    )
    assert answer["reasons"][0] == summary
    assert answer["pods"][0]["reasons"][0] == summary
    assert any(line.startswith("node-a: ") for line in answer["reasons"][1:])


def test_a_claim_allocated_for_another_node(small) -> None:
    """The second pod shares a claim the first got on node-a, which is now full: node-a cannot
    allocate its own claim, node-b could, but the shared claim is not available there."""
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "team"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
    }

    def pod(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "resourceClaims": [
                    {"name": "shared", "resourceClaimName": "shared"},
                    {"name": "own", "resourceClaimTemplateName": "one-gpu"},
                ],
            },
        }

    text = yaml.safe_dump_all([TEMPLATE, shared, pod("first"), pod("second")])
    answer = what_if(text, use_cache=False)
    first, second = answer["pods"]
    assert first["node"] == "node-a" and second["fits"] is False
    assert second["reasons"][0] == (
        "0/4 nodes are available: 1 cannot allocate all claims, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "1 resourceclaim not available on the node."
    )


def test_a_daemonset_pod_is_pinned_by_node_affinity(small) -> None:
    """A DaemonSet's pod that its own node cannot take: the other nodes were left out by
    NodeAffinity's PreFilter (the controller pins with matchFields metadata.name)."""
    documents = list(yaml.safe_load_all((FIXTURES / "daemonset.yaml").read_text()))
    template = next(d for d in documents if d and d["kind"] == "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"].update(
        allocationMode="ExactCount", count=3
    )
    answer = what_if(yaml.safe_dump_all(documents), use_cache=False)
    first = answer["pods"][0]
    assert first["pod"] == "monitoring/exporter-node-a" and first["fits"] is False
    assert first["reasons"][0] == (
        "0/4 nodes are available: 1 cannot allocate all claims, "
        "3 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_a_selector_failing_on_a_device_aborts_the_attempt(small) -> None:
    """A CEL runtime error in the allocator is the DynamicResources filter's error status,
    which ends the scheduler's attempt with that error instead of a count of nodes."""
    template, pod = list(yaml.safe_load_all(pod_yaml()))
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].nosuch == 1'}}]
    answer = what_if(yaml.safe_dump_all([template, pod]), use_cache=False)
    assert answer["fits"] is False
    # allocator_experimental.go: "claim %s: selector #%d on device %s: CEL runtime error: %w".
    assert answer["reasons"][0] == (
        'running "DynamicResources" filter plugin: claim team/p-gpu: selector #0 on device '
        f"{DRIVER}/node-a/gpu-0: CEL runtime error: no such key: nosuch"
    )


def test_a_node_that_is_not_ready_counts_as_tainted() -> None:
    """A Ready condition False or Unknown is the lifecycle controller's NoSchedule taint, which
    a toleration of it lets through."""
    for status, key in (("False", "not-ready"), ("Unknown", "unreachable")):
        node = {
            "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": status}]},
        }
        plain = NodeFilter.from_pod_spec({}, where="pod")
        assert plain.check(node) == ("TaintToleration", "node(s) had untolerated taint(s)")
        toleration = {"key": f"node.kubernetes.io/{key}", "operator": "Exists"}
        tolerant = NodeFilter.from_pod_spec({"tolerations": [toleration]}, where="pod")
        assert tolerant.check(node) == ("", "")


def test_node_affinity_prefilter_names_the_nodes() -> None:
    """matchFields metadata.name In in every term leaves only those nodes; terms whose names
    do not meet conflict."""

    def pod(*terms: list[str]) -> NodeFilter:
        selector_terms = [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": values}]}
            for values in terms
        ]
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": selector_terms
                }
            }
        }
        return NodeFilter.from_pod_spec({"affinity": affinity}, where="pod")

    other = {"metadata": {"name": "other"}}
    assert pod(["a"], ["b"]).check(other) == (
        "NodeAffinity",
        "node(s) didn't satisfy plugin(s) [NodeAffinity]",
    )
    assert pod(["a"], ["b"]).check({"metadata": {"name": "b"}}) == ("", "")
    conflicting = NodeFilter(node_names=frozenset())
    assert conflicting.check(other) == ("NodeAffinity", "pod affinity terms conflict")
    reasons = Counter({"pod affinity terms conflict": 5})
    assert fit_error(5, reasons) == "0/5 nodes are available: pod affinity terms conflict."
