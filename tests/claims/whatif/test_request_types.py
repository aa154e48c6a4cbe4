"""Values of the wrong type are 400s naming the field, from every door: the API, jobs, the page
and its share link; pasted node shapes get the API server's validation, as imports do."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.claims.whatif.cluster import DRIVER
from tests.claims.whatif.helpers import URL, claim_yaml


@pytest.fixture
def page(viewer_user) -> Client:
    client = Client()
    client.force_login(viewer_user)
    return client


def device(index: int, **extra: Any) -> dict[str, Any]:
    return {"name": f"gpu-{index}", "attributes": {"index": {"int": index}}, **extra}


def shape(**slice_fields: Any) -> dict[str, Any]:
    """A one-slice node shape of two gpu.example.com devices; `slice_fields` replace its fields."""
    piece: dict[str, Any] = {
        "metadata": {"name": "{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "{node}",
            "pool": {"name": "{node}", "generation": 1, "resourceSliceCount": 1},
            "devices": [device(0), device(1)],
        },
    }
    piece.update(slice_fields)
    return {"node": {"labels": {"pool": "new"}}, "slices": [piece]}


def add_nodes(node_shape: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"op": "add-nodes", "count": 2, "shape": node_shape}]


def test_a_good_shape_still_adds_nodes(small, api) -> None:
    """The shape used below is valid as it is: two added nodes bring four devices."""
    body = {"yaml": claim_yaml(count=1), "count": "max", "assume": add_nodes(shape())}
    answer = api.post(URL, body, format="json")
    assert answer.status_code == 200, answer.content
    # Six schedulable devices in the cluster (node-a, node-b), four added.
    assert answer.json()["headroom"]["placed"] == 4 + 4


@pytest.mark.parametrize("namespace", [5, ["team-a"], {"name": "team-a"}, True, "Team A"])
def test_a_namespace_that_is_not_a_name_is_a_400(small, api, namespace) -> None:
    """The claim names its namespace; a `namespace` option of another type, or not a DNS label,
    is a 400 naming it, both for the answer and for a job (never a job that fails later)."""
    body = {"yaml": claim_yaml(namespace="team-a"), "namespace": namespace}
    for url in (URL, URL + "jobs/"):
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        assert response.json()["field"] == "namespace"


def test_a_namespace_name_is_still_taken(small, api) -> None:
    """A proper name is the input's default namespace, as before."""
    response = api.post(URL, {"yaml": claim_yaml(), "namespace": "team-b"}, format="json")
    assert response.status_code == 200
    assert response.json()["namespace"] == "team-b"


@pytest.mark.parametrize("metadata", [5, "name", ["a"], True])
def test_a_shape_slice_whose_metadata_is_not_a_mapping_is_a_400(small, api, metadata) -> None:
    """`metadata: 5` on a shape's slice names the field, through the API and jobs."""
    body = {"yaml": claim_yaml(count=1), "assume": add_nodes(shape(metadata=metadata))}
    for url in (URL, URL + "jobs/"):
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        assert response.json()["field"] == "assume[0].shape.slices[0].metadata"


def test_the_page_and_its_share_link_name_the_field_too(small, page) -> None:
    """The what-if page, posted or opened from a link, shows the error instead of failing."""
    form = {
        "yaml": claim_yaml(count=1),
        "assume": json.dumps(add_nodes(shape(metadata=5))),
        "namespace": "team-a",
    }
    posted = page.post(reverse("what-if"), form)
    assert posted.status_code == 200
    assert posted.context["error"].startswith("assume[0].shape.slices[0].metadata:")
    linked = page.get(reverse("what-if"), {**form, "run": "1"})
    assert linked.status_code == 200


def long_attribute() -> dict[str, Any]:
    node_shape = shape()
    node_shape["slices"][0]["spec"]["devices"][0]["attributes"]["model"] = {"string": "x" * 1000}
    return node_shape


def five_taints() -> dict[str, Any]:
    node_shape = shape()
    taints = [{"key": f"example.com/t{i}", "effect": "NoSchedule"} for i in range(5)]
    node_shape["slices"][0]["spec"]["devices"][0]["taints"] = taints
    return node_shape


def bad_name() -> dict[str, Any]:
    node_shape = copy.deepcopy(shape())
    node_shape["slices"][0]["spec"]["devices"][1]["name"] = "GPU_1"
    return node_shape


@pytest.mark.parametrize(
    ("node_shape", "field", "words"),
    [
        (long_attribute(), "devices[0].attributes", "64"),
        (five_taints(), "devices[0].taints", "4"),
        (bad_name(), "devices[1].name", "RFC 1123"),
    ],
)
def test_shapes_get_the_api_servers_limits(small, api, node_shape, field, words) -> None:
    """A 1,000-character attribute (limit 64), five taints on one device (limit 4) or a bad
    device name are refused as an imported slice is, naming the field."""
    body = {"yaml": claim_yaml(count=1), "assume": add_nodes(node_shape)}
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["field"].startswith("assume[0].shape.slices[0]")
    assert field in error["field"] + error["detail"] and words in error["detail"], error
