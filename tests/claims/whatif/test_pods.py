"""Pasted files of pods and workloads: every pod placed in turn, each with its own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from claims.whatif.service import what_if
from tests.claims.whatif.cluster import CLASS_CONFIG, GPUS_PER_NODE, NODES, schedulable_for
from tests.claims.whatif.helpers import URL

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def first_fit(count: int, nodes: list[str]) -> list[str]:
    """Where `count` one-GPU pods go when nodes are filled in name order."""
    return [nodes[i // GPUS_PER_NODE] for i in range(count)]


def devices(pod: dict) -> list[tuple[str, str]]:
    return [(d["pool"], d["device"]) for c in pod["claims"] for d in c["devices"]]


def ignored_documents(answer: dict) -> list[dict]:
    """The input's documents left aside (scheduler plugins not modelled are listed apart)."""
    return [i for i in answer["ignored"] if i["document"]]


def test_two_pods_of_one_template_take_a_gpu_each(small) -> None:
    """Both pods of the example driver's two-pod file get their own device, in order."""
    answer = what_if(fixture("basic-resourceclaimtemplate.yaml"), use_cache=False)
    pods = answer["pods"]
    assert [p["pod"] for p in pods] == ["gpu-basic/trainer-0", "gpu-basic/trainer-1"]
    assert all(p["fits"] for p in pods) and answer["fits"] is True
    assert [p["node"] for p in pods] == first_fit(2, schedulable_for())
    assert devices(pods[0]) != devices(pods[1])
    assert answer["gang"] is False


def test_the_namespace_is_ignored_not_refused(small) -> None:
    """A Namespace document is read (labels) and not reported as a wrong kind."""
    answer = what_if(fixture("basic-resourceclaimtemplate.yaml"), use_cache=False)
    assert ignored_documents(answer) == []
    assert answer["namespace"] == "gpu-basic"


def test_other_kinds_are_listed_as_ignored(small) -> None:
    """ConfigMaps, Services and DeviceTaintRules in a file are listed as ignored."""
    answer = what_if(fixture("deployment.yaml"), use_cache=False)
    ignored = {(i["kind"], i["name"]) for i in ignored_documents(answer)}
    assert ignored == {
        ("ConfigMap", "server-settings"),
        ("Service", "server"),
        ("DeviceTaintRule", "drain-node-b"),
    }


def test_deployment_replicas_are_placed_one_after_another(small) -> None:
    """Three replicas are three pods named like the controller's, each seeing the ones before."""
    answer = what_if(fixture("deployment.yaml"), use_cache=False)
    pods = answer["pods"]
    assert [p["pod"] for p in pods] == [f"inference/server-{i}" for i in range(3)]
    assert all(p["workload"] == "Deployment/server" for p in pods)
    assert [p["node"] for p in pods] == first_fit(3, schedulable_for())
    taken = [d for p in pods for d in devices(p)]
    assert len(taken) == len(set(taken)) == 3
    claims = [c["claim"] for p in pods for c in p["claims"]]
    assert claims == [f"inference/server-{i}-gpu" for i in range(3)]


def test_replicas_beyond_the_cluster_fail_with_the_filters_named(small) -> None:
    """Replicas past the schedulable GPUs fail, and the answer says which filters removed nodes."""
    spare = len(schedulable_for()) * GPUS_PER_NODE
    text = fixture("deployment.yaml").replace("replicas: 3", f"replicas: {spare + 1}")
    answer = what_if(text, use_cache=False)
    pods = answer["pods"]
    assert [p["fits"] for p in pods] == [True] * spare + [False]
    assert answer["fits"] is False
    last = pods[-1]
    assert last["filtered"]["counts"] == {"NodeUnschedulable": 1, "TaintToleration": 1}
    # The scheduler's words and order (FitError.Error(): "<count> <reason>" sorted as strings;
    # reasons of nodeunschedulable, tainttoleration and dynamicresources, Kubernetes 1.36).
    assert last["reasons"][0] == (
        f"0/{len(NODES)} nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable, 2 cannot allocate all claims."
    )
    assert any(f"pod {last['pod']}" in line for line in answer["reasons"])


def test_gang_places_all_replicas_on_one_node_or_none(small, api) -> None:
    """With gang: true all claims go on one node together: three GPUs fit on no node."""
    response = api.post(URL, {"yaml": fixture("deployment.yaml"), "gang": True}, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["gang"] is True
    assert answer["fits"] is False
    assert [p["fits"] for p in answer["pods"]] == [False] * 3


def test_gang_of_two_pods_shares_one_node(small) -> None:
    """Two one-GPU pods as a gang land on the same node."""
    answer = what_if(fixture("basic-resourceclaimtemplate.yaml"), gang=True, use_cache=False)
    nodes = {p["node"] for p in answer["pods"]}
    assert answer["fits"] is True and nodes == {schedulable_for()[0]}


def test_a_claim_two_pods_name_is_allocated_once(small) -> None:
    """The shared claim takes one device; the second pod follows it to its node."""
    answer = what_if(fixture("shared-claim.yaml"), use_cache=False)
    first, second = answer["pods"]
    assert first["fits"] and second["fits"]
    assert first["node"] == second["node"]
    assert devices(first) == devices(second) and len(devices(first)) == 1
    assert [c["shared"] for c in second["claims"]] == [True]
    assert [c["claim"] for c in answer["claims"]] == ["gpu-shared/shared-gpu"]


def test_the_allocation_config_is_in_the_answer(small) -> None:
    """Each claim's allocation carries the class's config, as the allocator returns it."""
    answer = what_if(fixture("basic-resourceclaimtemplate.yaml"), use_cache=False)
    config = answer["pods"][0]["claims"][0]["config"]
    assert [c["opaque"] for c in config] == [c["opaque"] for c in CLASS_CONFIG]
    assert all(c["source"] == "FromClass" for c in config)
    assert answer["placements"][0]["claims"][0]["config"] == config


def test_job_runs_min_of_parallelism_and_completions(small) -> None:
    """A Job gives min(parallelism, completions) pods, a CronJob its jobTemplate's, a
    StatefulSet its ordinals."""
    answer = what_if(fixture("batch.yaml"), use_cache=False)
    documents = list(yaml.safe_load_all(fixture("batch.yaml")))
    job = next(d for d in documents if d and d["kind"] == "Job")["spec"]
    runs = min(job["parallelism"], job["completions"])
    names = [p["pod"].split("/")[1] for p in answer["pods"]]
    assert names == [
        *(f"sweep-{i}" for i in range(runs)),
        "nightly-0",
        "store-0",
        "store-1",
    ]
    assert {p["workload"].split("/")[0] for p in answer["pods"]} == {
        "Job",
        "CronJob",
        "StatefulSet",
    }


def test_daemonset_runs_one_pod_per_eligible_node(small) -> None:
    """A DaemonSet's pods go to every node its filters allow (cordoned ones too: the
    controller tolerates that), one each."""
    answer = what_if(fixture("daemonset.yaml"), use_cache=False)
    eligible = [n for n in NODES if n != "node-c"]
    assert [p["pod"] for p in answer["pods"]] == [f"monitoring/exporter-{n}" for n in eligible]
    assert [p["node"] for p in answer["pods"]] == eligible


MALFORMED = [
    (
        "jobTemplate",
        "kind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: x}\n",
        "spec.jobTemplate",
    ),
    ("metadata", "kind: Deployment\nmetadata: x\nspec: {}\n", "metadata"),
    (
        "replicas",
        "kind: Deployment\nmetadata: {name: d}\nspec: {replicas: three, template: {spec: {}}}\n",
        "spec.replicas",
    ),
    ("template", "kind: Job\nmetadata: {name: j}\nspec: {template: [1]}\n", "spec.template"),
    (
        "parallelism",
        "kind: Job\nmetadata: {name: j}\nspec: {parallelism: -1, template: {spec: {}}}\n",
        "spec.parallelism",
    ),
    (
        "affinity",
        "kind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: [{name: g, "
        "resourceClaimTemplateName: t}]\n  affinity: {nodeAffinity: {"
        "requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: x}}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\n"
        "spec: {spec: {devices: {requests: [{name: g, exactly: "
        "{deviceClassName: gpu.example.com}}]}}}\n",
        "nodeSelectorTerms",
    ),
]


@pytest.mark.parametrize(("label", "text", "field"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_workloads_are_a_400_naming_the_field(small, api, label, text, field) -> None:
    """A workload with a field of the wrong shape is refused naming that field."""
    body = text if text.startswith("kind: Pod") else "apiVersion: apps/v1\n" + text
    if text.startswith("kind: Pod"):
        body = "apiVersion: v1\n" + text
    response = api.post(URL, {"yaml": body}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["field"], response.json()
