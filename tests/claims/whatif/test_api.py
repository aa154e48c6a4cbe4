"""What-if over the REST API with real YAML on a demo cluster, checked against the allocator."""

from __future__ import annotations

import json

import pytest

from claims.models import ResourceClaim
from inventory.models import Device, Node, ResourceSlice
from tests.claims.whatif.helpers import (
    URL,
    answer_keys,
    claim_object,
    claim_yaml,
    device_keys,
    direct,
)


@pytest.mark.django_db
def test_answer_per_node_matches_the_allocator(demo, api) -> None:
    """Each node's fit and chosen devices equal the allocator's own answer for that node."""
    text = claim_yaml()
    response = api.post(URL, {"yaml": text}, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    expected = direct([claim_object(text)])
    assert {n["node"] for n in answer["nodes"]} == set(expected)
    for entry in answer["nodes"]:
        want = expected[entry["node"]]
        if want["error"]:
            assert entry["fits"] is False and entry["error"]
            continue
        assert entry["fits"] == (want["results"] is not None), entry["node"]
        if entry["fits"]:
            assert answer_keys(entry) == device_keys(want["results"])
            assert entry["claims"][0]["nodeSelector"] == want["results"][0].get("nodeSelector")
        else:
            assert entry["reasons"] and entry["reasons"][0]["stage"]
    fitting = [e["node"] for e in answer["nodes"] if e["fits"] and e["schedulable"]]
    assert answer["summary"]["firstNode"] == (fitting[0] if fitting else None)
    assert answer["summary"]["nodesFit"] == sum(
        1 for e in expected.values() if e["results"] is not None
    )


@pytest.mark.django_db
def test_raw_yaml_body_gives_the_same_answer(demo, api) -> None:
    """Content-Type application/yaml with options in the query string is the same question."""
    text = claim_yaml()
    as_json = api.post(URL, {"yaml": text, "nodes": ["node-0001", "node-0004"]}, format="json")
    as_yaml = api.generic(
        "POST", URL + "?nodes=node-0001,node-0004", text, content_type="application/yaml"
    )
    assert as_yaml.status_code == 200, as_yaml.content
    assert [n["node"] for n in as_yaml.json()["nodes"]] == ["node-0001", "node-0004"]
    assert as_yaml.json()["nodes"] == as_json.json()["nodes"]


@pytest.mark.django_db
def test_headroom_equals_repeated_allocation(demo, api) -> None:
    """Copies placed one by one, each seeing the ones before, like repeated allocation."""
    text = claim_yaml(count=4)
    answer = api.post(URL, {"yaml": text, "count": 500}, format="json").json()
    schedulable = {n["node"] for n in answer["nodes"] if n["schedulable"]}
    claim = claim_object(text)
    placed: list[dict] = []
    per_node: dict[str, int] = {}
    while True:

        def add_placed(scenario, placed=placed):
            scenario["allocatedClaims"] = scenario["allocatedClaims"] + placed

        outcome = direct([claim], mutate=add_placed)
        node = next(
            (n for n in sorted(outcome) if n in schedulable and outcome[n]["results"]), None
        )
        if node is None:
            break
        placed.append({**claim, "status": {"allocation": outcome[node]["results"][0]}})
        per_node[node] = per_node.get(node, 0) + 1
    assert answer["headroom"]["placed"] == len(placed) == answer["summary"]["headroom"]
    assert {p["node"]: p["copies"] for p in answer["headroom"]["placements"]} == per_node
    assert answer["headroom"]["exhausted"] is True


@pytest.mark.django_db
def test_count_limits_the_copies_placed(demo, api) -> None:
    """With room for more, exactly `count` copies are placed."""
    answer = api.post(URL, {"yaml": claim_yaml(count=1), "count": 3}, format="json").json()
    assert answer["headroom"]["placed"] == 3
    assert answer["headroom"]["exhausted"] is False


@pytest.mark.django_db
def test_nothing_is_written(demo, api) -> None:
    """A what-if with headroom and assumptions leaves every stored object as it was."""
    before = (
        ResourceClaim.objects.count(),
        sorted(ResourceClaim.objects.values_list("uid", "resource_version")),
        Node.objects.count(),
        ResourceSlice.objects.count(),
        Device.objects.count(),
    )
    api.post(
        URL,
        {
            "yaml": claim_yaml(),
            "count": "max",
            "assume": [{"op": "add-nodes", "like": "node-0001", "count": 2}],
        },
        format="json",
    )
    after = (
        ResourceClaim.objects.count(),
        sorted(ResourceClaim.objects.values_list("uid", "resource_version")),
        Node.objects.count(),
        ResourceSlice.objects.count(),
        Device.objects.count(),
    )
    assert before == after


@pytest.mark.django_db
def test_identical_requests_are_answered_from_cache_until_the_cluster_changes(demo, api) -> None:
    """The second identical request is cached; a changed cluster state is asked again."""
    body = {"yaml": claim_yaml()}
    first = api.post(URL, body, format="json").json()
    second = api.post(URL, body, format="json").json()
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["nodes"] == first["nodes"]
    node = Node.objects.get(name="node-0001")
    raw = dict(node.raw)
    raw["metadata"] = {**raw["metadata"], "resourceVersion": "changed-1"}
    from inventory.sync import upsert_events

    upsert_events("Node", [(raw, None)], publish=False)
    third = api.post(URL, body, format="json").json()
    assert third["cached"] is False
    assert third["fingerprint"] != first["fingerprint"]


@pytest.mark.django_db
def test_signed_in_users_only(demo, anon_api) -> None:
    """Anonymous visitors cannot ask."""
    response = anon_api.post(URL, {"yaml": claim_yaml()}, format="json")
    assert response.status_code in (401, 403)


@pytest.mark.django_db
def test_quota_admission_reports_used_and_hard(demo, api) -> None:
    """A claim beyond the namespace's device quota is reported as rejected, with numbers."""
    from claims.models import ResourceQuota

    quota = ResourceQuota.objects.get(namespace="team-a")
    key = "gpu.example.com.deviceclass.resource.k8s.io/devices"
    hard = int(quota.hard[key])
    used = int(quota.used.get(key, 0))
    small = api.post(URL, {"yaml": claim_yaml(count=1)}, format="json").json()["quota"]
    item = next(i for i in small["items"] if i["resource"] == key)
    assert (item["hard"], item["used"], item["requested"]) == (str(hard), str(used), 1)
    assert small["allowed"] is (used + 1 <= hard)
    copies = hard - used + 1
    big = api.post(URL, {"yaml": claim_yaml(count=1), "count": copies}, format="json").json()
    assert big["quota"]["allowed"] is False
    assert key in big["quota"]["message"]
    assert big["quota"]["copiesAllowed"] <= hard - used


@pytest.mark.django_db
def test_pod_with_a_stored_template_and_a_deployment(demo, api) -> None:
    """A pod naming a stored template, and a Deployment's pod template, are both simulated."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trial", "namespace": "team-a"},
        "spec": {
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-pair"}],
        },
    }
    answer = api.post(URL, {"yaml": json.dumps(pod)}, format="json").json()
    assert answer["claims"][0]["claim"] == "team-a/trial-gpu"
    assert answer["fits"] in (True, False) and answer["summary"]["nodesChecked"] == 20
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"replicas": 2, "template": {"spec": pod["spec"]}},
    }
    same = api.post(URL, {"yaml": json.dumps(deployment)}, format="json").json()
    assert [n["fits"] for n in same["nodes"]] == [n["fits"] for n in answer["nodes"]]


@pytest.mark.django_db
def test_classic_claim_is_driver_allocated(demo, api) -> None:
    """A v1alpha2 claim is reported as allocated by its driver, not as an error."""
    classic = {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceClaim",
        "metadata": {"name": "old", "namespace": "team-a"},
        "spec": {"resourceClassName": "gpu.example.com"},
    }
    response = api.post(URL, {"yaml": json.dumps(classic)}, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["driverAllocated"] == ["team-a/old"]
    assert answer["simulated"] is False
