"""ResourceQuota for pods as upstream's pod evaluator counts it, and admission in the API
server's words.

The usage, constraints and scope tables are upstream's `pkg/quota/v1/evaluator/core/pods_test.go`
(TestPodEvaluatorUsage, TestPodConstraintsFunc, TestPodEvaluatorMatchingScopes), as data: the
pod spec and the quota lines it charges, the refusal it gets, the scopes it matches.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from claims.whatif.inputs import InputClaim
from claims.whatif.podasks import pod_asks
from claims.whatif.quota import (
    QuotaObject,
    admission,
    admit_in_turn,
    creations,
    must_specify,
    pod_matches_scope,
    pod_usage,
)
from claims.whatif.resources import amount

POD_COUNT = "count/pods"


def spec_with(
    *, init: list[dict] | None = None, containers: list[dict] | None = None, **spec: Any
) -> dict[str, Any]:
    out: dict[str, Any] = dict(spec)
    if init is not None:
        out["initContainers"] = init
    out["containers"] = containers or []
    return out


def res(requests: dict | None = None, limits: dict | None = None, name: str = "") -> dict:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources}


def counted(lines: dict[str, str]) -> dict[str, Fraction]:
    return {POD_COUNT: Fraction(1), "pods": Fraction(1), **{k: amount(v) for k, v in lines.items()}}


# TestPodEvaluatorUsage (pods being created: the terminal and deleted cases do not arise).
USAGE = [
    (
        "init container CPU",
        spec_with(init=[res({"cpu": "1m"}, {"cpu": "2m"})]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
    ),
    (
        "init container MEM",
        spec_with(init=[res({"memory": "1m"}, {"memory": "2m"})]),
        {"requests.memory": "1m", "limits.memory": "2m", "memory": "1m"},
    ),
    (
        "init container local ephemeral storage",
        spec_with(init=[res({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})]),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
        },
    ),
    (
        "init container hugepages",
        spec_with(init=[res({"hugepages-2Mi": "100Mi"})]),
        {"hugepages-2Mi": "100Mi", "requests.hugepages-2Mi": "100Mi"},
    ),
    (
        "init container extended resources",
        spec_with(init=[res({"example.com/dongle": "3"}, {"example.com/dongle": "3"})]),
        {"requests.example.com/dongle": "3"},
    ),
    (
        "init container implicit extended resources",
        spec_with(
            init=[
                res(
                    {"deviceclass.resource.kubernetes.io/dongle": "3"},
                    {"deviceclass.resource.kubernetes.io/dongle": "3"},
                )
            ]
        ),
        {"requests.deviceclass.resource.kubernetes.io/dongle": "3"},
    ),
    (
        "container CPU",
        spec_with(containers=[res({"cpu": "1m"}, {"cpu": "2m"})]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
    ),
    (
        "container MEM",
        spec_with(containers=[res({"memory": "1m"}, {"memory": "2m"})]),
        {"requests.memory": "1m", "limits.memory": "2m", "memory": "1m"},
    ),
    (
        "container hugepages",
        spec_with(containers=[res({"hugepages-2Mi": "100Mi"})]),
        {"hugepages-2Mi": "100Mi", "requests.hugepages-2Mi": "100Mi"},
    ),
    (
        "container extended resources",
        spec_with(containers=[res({"example.com/dongle": "3"}, {"example.com/dongle": "3"})]),
        {"requests.example.com/dongle": "3"},
    ),
    (
        "init container maximums override sum of containers",
        spec_with(
            init=[
                res(
                    {"cpu": "4", "memory": "100M", "example.com/dongle": "4"},
                    {"cpu": "8", "memory": "200M", "example.com/dongle": "4"},
                ),
                res(
                    {"cpu": "1", "memory": "50M", "example.com/dongle": "2"},
                    {"cpu": "2", "memory": "100M", "example.com/dongle": "2"},
                ),
            ],
            containers=[
                res(
                    {"cpu": "1", "memory": "50M", "example.com/dongle": "1"},
                    {"cpu": "2", "memory": "100M", "example.com/dongle": "1"},
                ),
                res(
                    {"cpu": "2", "memory": "25M", "example.com/dongle": "2"},
                    {"cpu": "5", "memory": "50M", "example.com/dongle": "2"},
                ),
            ],
        ),
        {
            "requests.cpu": "4",
            "requests.memory": "100M",
            "limits.cpu": "8",
            "limits.memory": "200M",
            "cpu": "4",
            "memory": "100M",
            "requests.example.com/dongle": "4",
        },
    ),
    (
        "count pod overhead as usage",
        spec_with(containers=[res({"cpu": "1"}, {"cpu": "2"})], overhead={"cpu": "1"}),
        {"requests.cpu": "2", "limits.cpu": "3", "cpu": "2"},
    ),
    (
        "pod-level CPU",
        spec_with(resources={"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
    ),
    (
        "pod-level Memory",
        spec_with(resources={"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}}),
        {"requests.memory": "1Mi", "limits.memory": "2Mi", "memory": "1Mi"},
    ),
    (
        "pod-level memory with container-level ephemeral storage",
        spec_with(
            resources={"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}},
            containers=[res({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})],
        ),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
            "requests.memory": "1Mi",
            "limits.memory": "2Mi",
            "memory": "1Mi",
        },
    ),
]


@pytest.mark.parametrize(("spec", "lines"), [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_pod_evaluator_usage(spec: dict, lines: dict[str, str]) -> None:
    """What a new pod charges, line by line (zero lines are left out, as RemoveZeros does)."""
    usage = {k: v for k, v in pod_usage(pod_asks(spec)).items() if v}
    assert usage == counted(lines)


# TestPodConstraintsFunc: (name, spec, quota lines, refusal).
CONSTRAINTS = [
    (
        "init container resource missing",
        spec_with(init=[res({"cpu": "1m"}, {"cpu": "2m"}, name="dummy")]),
        ["memory"],
        "must specify memory for: dummy",
    ),
    (
        "multiple init container resource missing",
        spec_with(
            init=[
                res({"cpu": "1m"}, {"cpu": "2m"}, name="foo"),
                res({"cpu": "1m"}, {"cpu": "2m"}, name="bar"),
            ]
        ),
        ["memory"],
        "must specify memory for: bar,foo",
    ),
    (
        "container resource missing",
        spec_with(containers=[res({"cpu": "1m"}, {"cpu": "2m"}, name="dummy")]),
        ["memory"],
        "must specify memory for: dummy",
    ),
    (
        "container resource missing multiple",
        spec_with(containers=[res(name="foo"), res(name="bar")]),
        ["memory", "cpu"],
        "must specify cpu for: bar,foo; memory for: bar,foo",
    ),
    (
        "pod-level resource set, container-level required resources missing",
        spec_with(
            resources={"requests": {"cpu": "1m"}}, containers=[res(name="foo"), res(name="bar")]
        ),
        ["memory", "cpu"],
        "",
    ),
]


@pytest.mark.parametrize(
    ("spec", "hard", "refusal"), [c[1:] for c in CONSTRAINTS], ids=[c[0] for c in CONSTRAINTS]
)
def test_pod_constraints(spec: dict, hard: list[str], refusal: str) -> None:
    """A quota tracking cpu or memory needs every container to name it."""
    quota = QuotaObject("q", {name: "10" for name in hard}, {})
    assert must_specify(quota, pod_asks(spec)) == refusal


ALL_SCOPES = [
    {"scopeName": "Terminating"},
    {"scopeName": "NotTerminating"},
    {"scopeName": "BestEffort"},
    {"scopeName": "NotBestEffort"},
    {"scopeName": "PriorityClass", "operator": "In", "values": ["class1"]},
    {"scopeName": "CrossNamespacePodAffinity"},
]

# TestPodEvaluatorMatchingScopes: (name, spec, matched scope names).
SCOPES = [
    ("EmptyPod", {}, ["NotTerminating", "BestEffort"]),
    (
        "PriorityClass",
        {"priorityClassName": "class1"},
        ["NotTerminating", "BestEffort", "PriorityClass"],
    ),
    (
        "NotBestEffort",
        spec_with(
            containers=[
                res(
                    {"cpu": "1", "memory": "50M", "example.com/dongle": "1"},
                    {"cpu": "2", "memory": "100M", "example.com/dongle": "1"},
                )
            ]
        ),
        ["NotTerminating", "NotBestEffort"],
    ),
    ("Terminating", {"activeDeadlineSeconds": 30}, ["Terminating", "BestEffort"]),
    (
        "CrossNamespaceRequiredAffinity",
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {}, "namespaces": ["ns1"], "namespaceSelector": {}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    (
        "CrossNamespacePreferredAffinityWithSelector",
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {}}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    (
        "CrossNamespaceRequiredAntiAffinity",
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {}, "namespaces": ["ns3"]}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
]


@pytest.mark.parametrize(("spec", "matched"), [c[1:] for c in SCOPES], ids=[c[0] for c in SCOPES])
def test_pod_matching_scopes(spec: dict, matched: list[str]) -> None:
    """Which quota scopes a pod matches."""
    asks = pod_asks({"containers": [], **spec})
    assert [s["scopeName"] for s in ALL_SCOPES if pod_matches_scope(s, asks)] == matched


def test_priority_class_selectors() -> None:
    """In, NotIn, Exists and DoesNotExist over the pod's priorityClassName."""
    high = pod_asks({"containers": [], "priorityClassName": "high"})
    none = pod_asks({"containers": []})

    def selector(operator: str, *values: str) -> dict[str, Any]:
        return {"scopeName": "PriorityClass", "operator": operator, "values": list(values)}

    assert pod_matches_scope(selector("In", "high"), high)
    assert not pod_matches_scope(selector("In", "high"), none)
    assert pod_matches_scope(selector("NotIn", "high"), none)
    assert not pod_matches_scope(selector("NotIn", "high", "low"), high)
    assert pod_matches_scope(selector("Exists"), high) and not pod_matches_scope(
        selector("Exists"), none
    )
    assert pod_matches_scope(selector("DoesNotExist"), none)


def cpu_pod(cpu: str, **spec: Any) -> dict[str, Any]:
    return {"containers": [res({"cpu": cpu, "memory": "1Gi"}, name="app")], **spec}


def test_a_pod_over_requests_cpu_is_refused_in_the_api_servers_words() -> None:
    """hard requests.cpu 1, used 1: one more cpu is refused; the message is the API server's."""
    quota = QuotaObject("compute", {"requests.cpu": "1"}, {"requests.cpu": "1"})
    entries = creations([(pod_asks(cpu_pod("1")), [])], extended_names={})
    assert admit_in_turn(entries, quotas=[quota], extended=[]) == [
        "exceeded quota: compute, requested: requests.cpu=1, used: requests.cpu=1, "
        "limited: requests.cpu=1"
    ]
    summary = admission(
        [],
        namespace="team",
        quotas=[quota],
        classes=[],
        copies=1,
        pods=[(pod_asks(cpu_pod("1")), [])],
    )
    assert summary["allowed"] is False
    assert summary["items"][0]["resource"] == "requests.cpu"
    assert summary["message"].startswith("exceeded quota: compute")


def test_pods_are_admitted_in_turn() -> None:
    """With room for 1.5 cpu, the first 1-cpu pod is admitted, the second refused."""
    quota = QuotaObject("compute", {"cpu": "2", "pods": "10"}, {"cpu": "500m", "pods": "1"})
    entries = creations(
        [(pod_asks(cpu_pod("1")), []), (pod_asks(cpu_pod("1")), [])], extended_names={}
    )
    first, second = admit_in_turn(entries, quotas=[quota], extended=[])
    assert first == ""
    assert second == ("exceeded quota: compute, requested: cpu=1, used: cpu=1500m, limited: cpu=2")


def test_scoped_quotas_apply_to_the_pods_they_match() -> None:
    """A BestEffort quota leaves a pod with requests alone; a NotBestEffort one counts it."""
    best = QuotaObject.from_spec("best", {"pods": "0"}, {}, {"scopes": ["BestEffort"]})
    burst = QuotaObject.from_spec("burst", {"pods": "0"}, {}, {"scopes": ["NotBestEffort"]})
    entries = creations([(pod_asks(cpu_pod("1")), [])], extended_names={})
    assert admit_in_turn(entries, quotas=[best], extended=[]) == [""]
    assert admit_in_turn(entries, quotas=[burst], extended=[])[0].startswith(
        "exceeded quota: burst, requested: pods=1"
    )
    summary = admission(
        [],
        namespace="t",
        quotas=[best, burst],
        classes=[],
        copies=1,
        pods=[(pod_asks(cpu_pod("1")), [])],
    )
    assert [n["quota"] for n in summary["notApplied"]] == ["best"]


def test_a_missing_request_is_refused_before_it_is_counted() -> None:
    """A quota on limits.memory refuses a container that sets no memory limit."""
    quota = QuotaObject("mem", {"limits.memory": "8Gi"}, {})
    asks = pod_asks({"containers": [res({"cpu": "1"}, name="app")]})
    verdicts = admit_in_turn(
        creations([(asks, [])], extended_names={}), quotas=[quota], extended=[]
    )
    assert verdicts == ["failed quota: mem: must specify limits.memory for: app"]


def test_the_claim_for_a_pods_extended_resources_is_not_charged_twice() -> None:
    """The pod charges requests.example.com/gpu; the implicit claim adds only what is left."""
    asks = pod_asks({"containers": [res({"example.com/gpu": "2"}, {"example.com/gpu": "2"})]})
    claim = InputClaim(
        obj={
            "metadata": {
                "name": "p-extended-resources",
                "namespace": "t",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-0",
                            "exactly": {"deviceClassName": "gpu", "count": 2},
                        }
                    ]
                }
            },
        },
        source="implicit",
    )
    entries = creations([(asks, [claim])], extended_names={"gpu": "example.com/gpu"})
    quota = QuotaObject(
        "gpus",
        {"requests.example.com/gpu": "2", "count/resourceclaims.resource.k8s.io": "5"},
        {},
    )
    assert admit_in_turn(entries, quotas=[quota], extended=["example.com/gpu"]) == [""]
    charged, _ = entries[0].usage_under(quota, extended=["example.com/gpu"])
    assert charged == {
        "requests.example.com/gpu": 2,
        "count/resourceclaims.resource.k8s.io": 1,
    }
