"""The fake API server serves PriorityClasses (scheduling.k8s.io/v1) and PodDisruptionBudgets
(policy/v1) as kube-apiserver does, read by the official kubernetes client's typed APIs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from dralib.kube.fakeapi import FakeApiServer


def priority_class(name: str, value: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def budget(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
        "status": {
            "disruptionsAllowed": 1,
            "currentHealthy": 3,
            "desiredHealthy": 2,
            "expectedPods": 3,
        },
    }


def test_priority_classes_listed_and_got_by_the_typed_client(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """SchedulingV1Api lists and reads PriorityClasses, decoded into its typed models."""
    server.apply(priority_class("high", 1000, preemptionPolicy="PreemptLowerPriority"))
    server.apply(priority_class("default", 10, globalDefault=True))
    scheduling = client.SchedulingV1Api(api)
    listed = scheduling.list_priority_class()
    assert listed.kind == "PriorityClassList"
    assert [(p.metadata.name, p.value) for p in listed.items] == [("default", 10), ("high", 1000)]
    assert scheduling.read_priority_class("default").global_default is True
    assert scheduling.read_priority_class("high").preemption_policy == "PreemptLowerPriority"
    with pytest.raises(ApiException) as error:
        scheduling.read_priority_class("missing")
    assert error.value.status == 404
    assert json.loads(error.value.body)["details"]["group"] == "scheduling.k8s.io"


def test_pod_disruption_budgets_listed_per_namespace_and_watched(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """PolicyV1Api lists PDBs across and within namespaces and watches them from a version."""
    server.apply(budget("web", "shop", minAvailable=2))
    server.apply(budget("db", "data", maxUnavailable="25%"))
    policy = client.PolicyV1Api(api)
    everywhere = policy.list_pod_disruption_budget_for_all_namespaces()
    assert sorted(p.metadata.name for p in everywhere.items) == ["db", "web"]
    shop = policy.list_namespaced_pod_disruption_budget("shop")
    assert [(p.metadata.name, p.spec.min_available) for p in shop.items] == [("web", 2)]
    db = policy.read_namespaced_pod_disruption_budget("db", "data")
    assert db.spec.max_unavailable == "25%" and db.status.disruptions_allowed == 1
    version = everywhere.metadata.resource_version
    server.apply(budget("cache", "shop", minAvailable=1))
    stream = watch.Watch().stream(
        policy.list_pod_disruption_budget_for_all_namespaces,
        resource_version=version,
        timeout_seconds=2,
    )
    first = next(stream)
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "cache")


def test_fixed_groups_discovered(server: FakeApiServer, api: client.ApiClient) -> None:
    """Discovery names scheduling.k8s.io/v1 and policy/v1 with their resources, also without
    DRA; an unserved version of those groups is a 404."""
    server.set_served_versions([])
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["scheduling.k8s.io"].preferred_version.version == "v1"
    assert groups["policy"].preferred_version.version == "v1"
    resources = client.PolicyV1Api(api).get_api_resources().resources
    assert {(r.name, r.namespaced) for r in resources} >= {
        ("poddisruptionbudgets", True),
        ("poddisruptionbudgets/status", True),
    }
    classes = client.SchedulingV1Api(api).get_api_resources().resources
    assert [(r.name, r.namespaced, r.short_names) for r in classes] == [
        ("priorityclasses", False, ["pc"])
    ]
    with pytest.raises(ApiException) as error:
        client.CustomObjectsApi(api).get_api_resources("policy", "v1beta1")
    assert error.value.status == 404
