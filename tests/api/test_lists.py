"""List, detail, ordering and YAML of every endpoint against the hand-built cluster."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.api.conftest import names, results
from tests.api.endpoints import ENDPOINTS, SYNC_ENDPOINTS, Endpoint

ids = [endpoint.url for endpoint in ENDPOINTS]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_list_returns_every_object(api, cluster, endpoint: Endpoint) -> None:
    """A list holds exactly the objects the cluster fixture created."""
    keys = names(api.get(endpoint.url), endpoint.key)
    assert sorted(keys) == sorted(endpoint.expected)


@pytest.mark.parametrize("endpoint", SYNC_ENDPOINTS, ids=[e.url for e in SYNC_ENDPOINTS])
def test_sync_lists(api, sync_rows, endpoint: Endpoint) -> None:
    """Sync status and skipped objects list what the sync recorded."""
    assert set(names(api.get(endpoint.url), endpoint.key)) == endpoint.expected


def test_skipped_object_names_the_field(api, sync_rows) -> None:
    """A skipped object says which field was wrong."""
    (item,) = results(api.get("/api/inventory/skipped-objects/"))
    assert item["kind"] == "ResourceSlice"
    assert "spec" in item["field"] or "spec" in item["error"]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_detail_matches_list_item(api, cluster, endpoint: Endpoint) -> None:
    """The detail of the first list item is reachable and carries the same identity."""
    first = results(api.get(endpoint.url))[0]
    detail = api.get(f"{endpoint.url}{first['id']}/")
    assert detail.status_code == 200
    assert detail.json()[endpoint.key] == first[endpoint.key]


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.raw], ids=lambda e: e.url)
def test_detail_includes_normalized_object(api, cluster, endpoint: Endpoint) -> None:
    """Detail views of synced kinds include the normalized v1 object, lists do not."""
    first = results(api.get(endpoint.url))[0]
    assert "obj" not in first and "raw" not in first
    detail = api.get(f"{endpoint.url}{first['id']}/").json()
    assert detail["obj"]["metadata"]["name"] == first["name"]


def _yaml(response: Any) -> Any:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/yaml")
    return yaml.safe_load(response.content)


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.raw], ids=lambda e: e.url)
def test_yaml_list_is_a_kubernetes_list_of_raw_objects(api, cluster, endpoint: Endpoint) -> None:
    """`?format=yaml` on a list gives `kind: List` whose items are the objects as sent."""
    document = _yaml(api.get(endpoint.url, {"format": "yaml"}))
    assert document["apiVersion"] == "v1"
    assert document["kind"] == "List"
    assert {item["metadata"]["name"] for item in document["items"]} == endpoint.expected
    for item in document["items"]:
        assert item == cluster[(item["kind"], item["metadata"]["name"])]


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.raw], ids=lambda e: e.url)
def test_yaml_detail_is_the_raw_object(api, cluster, endpoint: Endpoint) -> None:
    """`?format=yaml` on a detail gives the one object exactly as the API server sent it."""
    first = results(api.get(endpoint.url))[0]
    document = _yaml(api.get(f"{endpoint.url}{first['id']}/", {"format": "yaml"}))
    assert document["metadata"]["uid"] == first["uid"]
    assert document["kind"] and document["apiVersion"] == first["api_version"]


def test_yaml_of_devices_is_the_published_device_entry(api, cluster) -> None:
    """Devices have no object of their own: their YAML is the device entry of the slice."""
    document = _yaml(api.get("/api/inventory/devices/", {"format": "yaml", "pool": "node-a"}))
    sent = cluster[("ResourceSlice", "node-a-gpu")]["spec"]["devices"]
    assert document["kind"] == "List"
    assert document["items"] == sent


def test_yaml_list_pages_carry_a_continue_token(api, cluster) -> None:
    """A YAML page with more items after it says so in `metadata.continue`, usable as cursor."""
    first = _yaml(api.get("/api/inventory/devices/", {"format": "yaml", "limit": 4}))
    assert len(first["items"]) == 4
    token = first["metadata"]["continue"]
    second = _yaml(
        api.get("/api/inventory/devices/", {"format": "yaml", "limit": 4, "cursor": token})
    )
    assert [d["name"] for d in second["items"]] and second["items"] != first["items"]


def test_yaml_of_non_raw_endpoints_renders_the_serialized_items(api, cluster) -> None:
    """Pools (no Kubernetes object of their own) render their API items inside the List."""
    document = _yaml(api.get("/api/inventory/pools/", {"format": "yaml"}))
    assert {item["name"] for item in document["items"]} == {
        "node-a",
        "node-b",
        "node-a-mig",
        "node-a-net",
    }


def test_yaml_error_is_rendered_as_yaml(api, cluster) -> None:
    """A 400 asked for as YAML still explains itself, in YAML."""
    response = api.get("/api/inventory/devices/", {"format": "yaml", "ordering": "bogus"})
    assert response.status_code == 400
    assert "ordering" in yaml.safe_load(response.content)


@pytest.mark.parametrize(
    ("url", "field", "key"),
    [
        ("/api/inventory/nodes/", "name", "name"),
        ("/api/inventory/device-classes/", "name", "name"),
        ("/api/inventory/pools/", "name", "name"),
        ("/api/inventory/resource-slices/", "name", "name"),
        ("/api/inventory/devices/", "name", "key"),
        ("/api/inventory/devices/", "state", "key"),
        ("/api/claims/resource-claims/", "name", "name"),
        ("/api/claims/resource-claims/", "namespace", "name"),
        ("/api/claims/pods/", "name", "name"),
        ("/api/claims/allocated-devices/", "device", "device"),
    ],
)
def test_ordering_ascending_and_descending(api, cluster, url: str, field: str, key: str) -> None:
    """`?ordering=f` sorts by f and `?ordering=-f` sorts the other way."""
    ascending = results(api.get(url, {"ordering": field}))
    descending = results(api.get(url, {"ordering": f"-{field}"}))
    values = [item[field] for item in ascending]
    assert values == sorted(values)
    assert [item[field] for item in descending] == sorted(values, reverse=True)
    assert {item[key] for item in ascending} == {item[key] for item in descending}


@pytest.mark.parametrize("ordering", ["name", "-name", "state", "-driver", "pool_name"])
def test_cursor_pages_cover_the_list_once(api, cluster, ordering: str) -> None:
    """Following `next` with ?limit=2 visits every device exactly once, even across ties."""
    seen: list[str] = []
    url: str | None = f"/api/inventory/devices/?limit=2&ordering={ordering}"
    pages = 0
    while url:
        body = api.get(url).json()
        seen.extend(item["key"] for item in body["results"])
        url = body["next"]
        pages += 1
    assert pages == 6
    assert len(seen) == len(set(seen)) == 11


def test_cursor_previous_returns_the_same_page(api, cluster) -> None:
    """Going forward two pages and back one gives the second page again."""
    first = api.get("/api/inventory/devices/", {"limit": 3, "ordering": "state"}).json()
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()
    back = api.get(third["previous"]).json()
    assert [d["key"] for d in back["results"]] == [d["key"] for d in second["results"]]


def test_list_limit_above_maximum_is_clamped(api, cluster) -> None:
    """A limit above 1000 returns a page rather than an error (DRF's documented behaviour)."""
    assert len(results(api.get("/api/inventory/devices/", {"limit": 5000}))) == 11
