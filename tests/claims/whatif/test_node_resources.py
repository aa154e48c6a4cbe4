"""What-if sees the whole node: every synced pod's requests and host ports, quota and LimitRanges.

The cluster: three nodes of 4 cpu, 8Gi and 110 pods each, in name order cpu-1, cpu-2, gpu-1;
gpu-1 also publishes two GPUs. Running on them: a 3-cpu pod on cpu-1, a finished 4-cpu pod on
cpu-2 (the scheduler no longer counts it), a pod holding host port 8080 on gpu-1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from claims.models import Pod
from claims.whatif.service import what_if
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_answer_schema import _errors

DRIVER = "gpu.example.com"
NODES = ("cpu-1", "cpu-2", "gpu-1")


def node(name: str, *, cpu: str = "4", pods: str = "110") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name},
        },
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": cpu,
                "memory": "8Gi",
                "pods": pods,
                "ephemeral-storage": "100Gi",
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    *,
    node_name: str = "",
    cpu: str | None = None,
    memory: str | None = None,
    phase: str = "Running",
    namespace: str = "team",
    host_port: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "app", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    body: dict[str, Any] = {"containers": [container], **spec}
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pod-{name}"},
        "spec": body,
        "status": {"phase": phase},
    }


def cluster() -> list[dict[str, Any]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER, "uid": "uid-class"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    gpus = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "gpu-1-gpus", "uid": "uid-slice"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(2)],
        },
    }
    running = [
        pod("busy", node_name="cpu-1", cpu="3", memory="1Gi"),
        pod("done", node_name="cpu-2", cpu="4", phase="Succeeded"),
        pod("proxy", node_name="gpu-1", cpu="100m", host_port=8080),
    ]
    return [device_class, *(node(n) for n in NODES), gpus, *running]


@pytest.fixture
def whole(db) -> None:
    load_objects(cluster())


def ask(*documents: dict[str, Any], **options: Any) -> dict[str, Any]:
    return what_if(yaml.safe_dump_all(documents), use_cache=False, **options)


def deployment(name: str, replicas: int, *, cpu: str, memory: str = "256Mi") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ]
                },
            },
        },
    }


def test_every_pod_is_stored_slim_with_its_requests(whole) -> None:
    """Pods without claims keep their projection (node, phase, requests, ports), not objects."""
    busy = Pod.objects.get(name="busy")
    assert (busy.node_name, busy.cpu_request, busy.memory_request) == ("cpu-1", 3000, 2**30)
    assert (busy.uses_claims, busy.raw, busy.obj) == (False, {}, {})
    assert Pod.objects.get(name="proxy").host_ports == [["0.0.0.0", "TCP", 8080]]


def test_a_pod_bigger_than_any_node_fits_nowhere(whole) -> None:
    """cpu 500 and memory 900Gi on 4-cpu, 8Gi nodes: NodeResourcesFit removes every node, with
    both of its reasons, and the summary counts each as FitError does."""
    answer = ask(pod("huge", cpu="500", memory="900Gi"))
    assert answer["fits"] is False
    for entry in answer["nodes"]:
        assert entry["schedulable"] is False
        assert entry["filter"] == {
            "filter": "NodeResourcesFit",
            "reason": "Insufficient cpu, Insufficient memory",
            "reasons": ["Insufficient cpu", "Insufficient memory"],
        }
    assert answer["reasons"][0] == (
        "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory."
    )
    assert answer["pods"][0]["reasons"][0] == answer["reasons"][0]


def test_a_cpu_only_deployment_is_placed_replica_by_replica(whole) -> None:
    """Each 2-cpu replica takes its share: cpu-1 has 1 cpu left, the finished pod on cpu-2 holds
    nothing, so two go to cpu-2, one to gpu-1 (3.9 cpu left beside its proxy), and the fourth
    finds no room."""
    answer = ask(deployment("web", 4, cpu="2"))
    pods = answer["pods"]
    assert [p["node"] for p in pods] == ["cpu-2", "cpu-2", "gpu-1", None]
    assert [p["fits"] for p in pods] == [True, True, True, False]
    assert pods[3]["reasons"][0] == "0/3 nodes are available: 3 Insufficient cpu."
    assert pods[0]["filtered"]["nodes"] == [
        {"node": "cpu-1", "filter": "NodeResourcesFit", "reason": "Insufficient cpu"}
    ]
    assert answer["fits"] is False


def test_a_file_of_ordinary_and_gpu_pods_is_answered_pod_by_pod(whole) -> None:
    """Three ordinary pods and one GPU pod: four answers, in document order."""
    gpu_claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "team"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}
                    ]
                }
            }
        },
    }
    trainer = pod(
        "trainer", cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    )
    answer = ask(pod("a", cpu="1"), pod("b", cpu="1"), gpu_claim, pod("c", cpu="1"), trainer)
    assert [p["pod"] for p in answer["pods"]] == ["team/a", "team/b", "team/c", "team/trainer"]
    assert [p["node"] for p in answer["pods"]] == ["cpu-1", "cpu-2", "cpu-2", "gpu-1"]
    assert answer["pods"][3]["claims"][0]["devices"][0]["pool"] == "gpu-1"
    assert answer["fits"] is True


def test_a_taken_host_port_removes_the_node(whole) -> None:
    """gpu-1 already binds 8080: NodePorts, in the scheduler's words."""
    answer = ask(pod("web", cpu="100m", host_port=8080), nodes="gpu-1")
    assert answer["nodes"][0]["filter"] == {
        "filter": "NodePorts",
        "reason": "node(s) didn't have free ports for the requested pod ports",
    }
    assert answer["reasons"][0] == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


def test_headroom_counts_copies_until_the_cpu_runs_out(whole) -> None:
    """1-cpu copies: 1 on cpu-1, 4 on cpu-2 and 3 on gpu-1 (its 100m proxy): 8 in all."""
    answer = ask(pod("small", cpu="1"), count="max")
    headroom = answer["headroom"]
    assert headroom["placed"] == 8
    assert {p["node"]: p["copies"] for p in headroom["placements"]} == {
        "cpu-1": 1,
        "cpu-2": 4,
        "gpu-1": 3,
    }


def test_too_many_pods_counts_the_pods_on_the_node(db) -> None:
    """A node allowing two pods that runs one takes one more, then says "Too many pods"."""
    load_objects([node("tiny", pods="2"), pod("there", node_name="tiny")])
    answer = ask(deployment("web", 2, cpu="10m"))
    assert [p["node"] for p in answer["pods"]] == ["tiny", None]
    assert answer["pods"][1]["reasons"][0] == "0/1 nodes are available: 1 Too many pods."


def test_a_new_pod_on_a_node_changes_the_answer(whole) -> None:
    """The cluster's fingerprint covers pods: a pod synced onto cpu-2 is seen by the next answer."""
    first = what_if(yaml.safe_dump(pod("x", cpu="4")))
    assert first["pods"][0]["node"] == "cpu-2"
    load_objects([pod("filler", node_name="cpu-2", cpu="1")])
    second = what_if(yaml.safe_dump(pod("x", cpu="4")))
    assert second["cached"] is False
    # cpu-2 now has 3 cpu left, gpu-1 3.9 beside its proxy.
    assert (second["fits"], second["pods"][0]["node"]) == (False, None)


def test_quota_on_requests_cpu_refuses_the_pod(whole) -> None:
    """hard requests.cpu 1, used 1: the pod is not admitted; the API server says why."""
    load_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "compute", "namespace": "team", "uid": "uid-quota"},
                "spec": {"hard": {"requests.cpu": "1"}},
                "status": {"hard": {"requests.cpu": "1"}, "used": {"requests.cpu": "1"}},
            }
        ]
    )
    answer = ask(pod("web", cpu="500m"))
    message = (
        "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1, "
        "limited: requests.cpu=1"
    )
    assert answer["quota"]["allowed"] is False
    assert answer["quota"]["message"] == message
    assert answer["quota"]["items"] == [
        {
            "quota": "compute",
            "resource": "requests.cpu",
            "hard": "1",
            "used": "1",
            "requested": 1,
            "requestedQuantity": "500m",
            "exceeded": True,
        }
    ]
    assert answer["fits"] is False
    assert answer["pods"][0]["fits"] is False
    assert answer["pods"][0]["reasons"] == [f"pod team/web: {message}"]


def test_limit_range_defaults_count_as_requests(whole) -> None:
    """A pod asking nothing gets the namespace's default request of 3 cpu: cpu-1 (1 left) is
    passed over."""
    load_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "defaults", "namespace": "team", "uid": "uid-limits"},
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "default": {"cpu": "3"},
                            "defaultRequest": {"cpu": "3"},
                        }
                    ]
                },
            }
        ]
    )
    answer = ask(pod("bare"))
    assert answer["pods"][0]["node"] == "cpu-2"
    assert answer["nodes"][0]["filter"]["reason"] == "Insufficient cpu"


def test_filters_not_modelled_are_listed(whole) -> None:
    """The answer names the scheduler plugins it does not run."""
    answer = ask(pod("web", cpu="1"))
    named = {(i["kind"], i["name"]) for i in answer["ignored"] if not i["document"]}
    assert {
        ("SchedulerFilter", "VolumeRestrictions"),
        ("SchedulerFilter", "NodeVolumeLimits"),
        ("SchedulerFilter", "VolumeBinding"),
        ("SchedulerFilter", "VolumeZone"),
        ("SchedulerPostFilter", "DefaultPreemption"),
    } <= named
    modelled = {"NodeResourcesFit", "NodePorts", "PodTopologySpread", "InterPodAffinity"}
    assert not modelled & {i["name"] for i in answer["ignored"]}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The OpenAPI document as `manage.py spectacular` writes it."""
    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    return json.loads(path.read_text())


def test_node_resource_answers_validate_against_the_schema(whole, openapi) -> None:
    """Answers with NodeResourcesFit and NodePorts verdicts, quota lines and the plugins not
    modelled validate against the published WhatIfAnswer."""
    answers = [
        ask(pod("huge", cpu="500", memory="900Gi")),
        ask(deployment("web", 4, cpu="2")),
        ask(pod("web", cpu="100m", host_port=8080), count=3),
    ]
    for answer in answers:
        assert _errors(openapi, "WhatIfAnswer", answer) == []


def spread_out(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment whose replicas refuse to share a node (required anti-affinity)."""
    workload = deployment(name, replicas, cpu="100m")
    workload["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return workload


def test_replicas_with_anti_affinity_take_one_node_each(whole) -> None:
    """Each placed replica refuses its node to the next: three nodes, three replicas; the
    fourth finds none, in InterPodAffinity's words."""
    answer = ask(spread_out("web", 4))
    assert [p["node"] for p in answer["pods"]] == ["cpu-1", "cpu-2", "gpu-1", None]
    assert answer["pods"][3]["reasons"][0] == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )


def test_a_running_pods_anti_affinity_is_respected(whole) -> None:
    """A synced pod on cpu-2 that wants no `app: web` beside it keeps web pods off cpu-2."""
    guard = pod("guard", node_name="cpu-2", cpu="100m")
    guard["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    load_objects([guard])
    assert Pod.objects.get(name="guard").anti_affinity[0]["topologyKey"] == (
        "kubernetes.io/hostname"
    )
    answer = ask(deployment("web", 1, cpu="2"))
    assert answer["pods"][0]["node"] == "gpu-1"
    cpu_2 = next(n for n in answer["nodes"] if n["node"] == "cpu-2")
    assert cpu_2["filter"] == {
        "filter": "InterPodAffinity",
        "reason": "node(s) didn't satisfy existing pods anti-affinity rules",
    }
