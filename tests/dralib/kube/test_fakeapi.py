"""The fake API server, driven over real HTTP by the official kubernetes client (raw JSON only)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from demo.__main__ import main as cli_main
from dralib.kube.fakeapi import ChurnLoop, FakeApiServer, convert_for_served
from tests.dralib.kube.fakeapi_requests import (
    GROUP,
    claim_obj,
    later,
    list_slices,
    raw,
    slice_obj,
    stream_lines,
)


def test_discovery_names_served_versions_newest_preferred(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """Discovery lists the served resource.k8s.io versions with the newest as preferred."""
    server.set_served_versions(["v1beta1", "v1"])
    groups = raw(client.ApisApi(api).get_api_versions(_preload_content=False))["groups"]
    # Groups GA long before DRA (scheduling.k8s.io, policy) are listed beside it.
    dra = [g for g in groups if g["name"] == GROUP]
    assert len(dra) == 1 and {"scheduling.k8s.io", "policy"} <= {g["name"] for g in groups}
    assert [v["version"] for v in dra[0]["versions"]] == ["v1", "v1beta1"]
    assert dra[0]["preferredVersion"]["version"] == "v1"
    custom = client.CustomObjectsApi(api)
    beta = raw(custom.get_api_resources(GROUP, "v1beta1", _preload_content=False))
    names = {r["name"] for r in beta["resources"]}
    assert {"resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"} <= names
    assert "devicetaintrules" not in names
    core = raw(client.CoreV1Api(api).get_api_resources(_preload_content=False))
    assert {"nodes", "pods", "resourcequotas", "limitranges", "namespaces"} <= {
        r["name"] for r in core["resources"]
    }
    assert client.VersionApi(api).get_code().minor == "34"


def test_v1alpha2_only_cluster_serves_classic_kinds(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A v1alpha2-only server offers the classic kinds and answers 404 for v1."""
    server.set_served_versions(["v1alpha2"])
    custom = client.CustomObjectsApi(api)
    alpha = raw(custom.get_api_resources(GROUP, "v1alpha2", _preload_content=False))
    names = {r["name"] for r in alpha["resources"]}
    assert {"resourceclasses", "podschedulingcontexts", "resourceclaimparameters"} <= names
    assert {"resourceclassparameters", "resourceclaims", "resourceslices"} <= names
    with pytest.raises(ApiException) as error:
        custom.get_api_resources(GROUP, "v1", _preload_content=False)
    assert error.value.status == 404


def test_cluster_without_dra_has_no_group(server: FakeApiServer, api: client.ApiClient) -> None:
    """Without DRA, /apis has no resource.k8s.io and its lists answer 404 like a real server."""
    server.set_served_versions([])
    groups = raw(client.ApisApi(api).get_api_versions(_preload_content=False))["groups"]
    assert GROUP not in {g["name"] for g in groups}
    with pytest.raises(ApiException) as error:
        list_slices(api)
    assert error.value.status == 404
    assert json.loads(error.value.body)["reason"] == "NotFound"


def test_paginated_list_is_a_consistent_sorted_snapshot(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """limit+continue pages through a sorted snapshot that ignores changes made meanwhile."""
    names = [f"slice-{i:02d}" for i in (5, 3, 1, 6, 2, 4, 0)]
    for name in names:
        server.apply(slice_obj(name))
    first = list_slices(api, limit=3)
    assert first["kind"] == "ResourceSliceList"
    assert first["apiVersion"] == f"{GROUP}/v1"
    assert first["metadata"]["remainingItemCount"] == len(names) - 3
    server.apply(slice_obj("slice-99"))
    server.delete("ResourceSlice", name="slice-05")
    seen = [item["metadata"]["name"] for item in first["items"]]
    page = first
    while page["metadata"].get("continue"):
        page = list_slices(api, limit=3, _continue=page["metadata"]["continue"])
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        seen += [item["metadata"]["name"] for item in page["items"]]
    assert seen == sorted(names)
    assert "kind" not in first["items"][0] and "apiVersion" not in first["items"][0]
    fresh = [item["metadata"]["name"] for item in list_slices(api)["items"]]
    assert "slice-99" in fresh and "slice-05" not in fresh


def test_continue_token_expires_after_compaction(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A continue token older than the compacted history gets 410 Gone, reason Expired."""
    for i in range(4):
        server.apply(slice_obj(f"s{i}"))
    first = list_slices(api, limit=2)
    server.apply(slice_obj("s9"))
    server.compact()
    with pytest.raises(ApiException) as error:
        list_slices(api, limit=2, _continue=first["metadata"]["continue"])
    assert error.value.status == 410
    assert json.loads(error.value.body)["reason"] == "Expired"


def test_resource_version_semantics_of_lists(server: FakeApiServer, api: client.ApiClient) -> None:
    """resourceVersion "0" ignores limit, Exact reads the past, a future version is a 504."""
    for i in range(3):
        server.apply(slice_obj(f"s{i}"))
    before = server.resource_version
    server.delete("resourceslices", name="s0")
    from_cache = list_slices(api, limit=1, resource_version="0")
    assert len(from_cache["items"]) == 2 and "continue" not in from_cache["metadata"]
    past = list_slices(api, resource_version=before, resource_version_match="Exact")
    assert [i["metadata"]["name"] for i in past["items"]] == ["s0", "s1", "s2"]
    assert past["metadata"]["resourceVersion"] == before
    with pytest.raises(ApiException) as error:
        list_slices(api, resource_version=str(int(server.resource_version) + 10))
    assert error.value.status == 504


def test_namespaced_lists_gets_and_core_kinds(server: FakeApiServer, api: client.ApiClient) -> None:
    """Claims and pods list per namespace and cluster-wide; single gets and 404s work."""
    server.apply(claim_obj("a", "team-b"))
    server.apply(claim_obj("b", "team-a"))
    server.apply(claim_obj("c", "team-a"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}}
    server.apply(pod)
    server.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    custom = client.CustomObjectsApi(api)
    everywhere = raw(
        custom.list_cluster_custom_object(GROUP, "v1", "resourceclaims", _preload_content=False)
    )
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]]
    assert keys == [("team-a", "b"), ("team-a", "c"), ("team-b", "a")]
    team_a = raw(
        custom.list_namespaced_custom_object(
            GROUP, "v1", "team-a", "resourceclaims", _preload_content=False
        )
    )
    assert [i["metadata"]["name"] for i in team_a["items"]] == ["b", "c"]
    one = raw(
        custom.get_namespaced_custom_object(
            GROUP, "v1", "team-b", "resourceclaims", "a", _preload_content=False
        )
    )
    assert one["kind"] == "ResourceClaim" and one["metadata"]["uid"]
    core = client.CoreV1Api(api)
    pods = raw(core.list_pod_for_all_namespaces(_preload_content=False))
    assert pods["kind"] == "PodList" and [i["metadata"]["name"] for i in pods["items"]] == ["p"]
    assert raw(core.list_namespaced_pod("team-b", _preload_content=False))["items"] == []
    node = raw(core.read_node("node-1", _preload_content=False))
    assert (
        node["metadata"]["resourceVersion"]
        == server.objects("nodes")[0]["metadata"]["resourceVersion"]
    )
    with pytest.raises(ApiException) as error:
        core.read_node("missing", _preload_content=False)
    assert error.value.status == 404


def test_selectors_filter_lists(server: FakeApiServer, api: client.ApiClient) -> None:
    """Label and field selectors narrow a list."""
    server.apply(slice_obj("a", driver="gpu.example.com"))
    server.apply(slice_obj("b", driver="nic.example.com"))
    by_label = list_slices(api, label_selector="driver in (nic,fpga)")
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["b"]
    by_field = list_slices(api, field_selector="spec.driver=gpu.example.com")
    assert [i["metadata"]["name"] for i in by_field["items"]] == ["a"]
    with pytest.raises(ApiException) as error:
        list_slices(api, label_selector="driver in (")
    assert error.value.status == 400


SELECTOR_CASES = [
    ("driver notin (gpu)", "", ["b", "c"]),
    ("driver", "", ["a", "b"]),
    ("!driver", "", ["c"]),
    ("driver!=gpu", "spec.driver!=nic.example.com", ["c"]),
    ("", "spec.driver==gpu.example.com,metadata.name=a", ["a"]),
]


@pytest.mark.parametrize(("labels", "fields", "names"), SELECTOR_CASES)
def test_selector_operators(
    server: FakeApiServer, api: client.ApiClient, labels: str, fields: str, names: list[str]
) -> None:
    """Set-based, existence and inequality terms select as on a real API server."""
    server.apply(slice_obj("a", driver="gpu.example.com"))
    server.apply(slice_obj("b", driver="nic.example.com"))
    unlabelled = slice_obj("c", driver="fpga.example.com")
    del unlabelled["metadata"]["labels"]
    server.apply(unlabelled)
    found = list_slices(api, label_selector=labels, field_selector=fields)
    assert [i["metadata"]["name"] for i in found["items"]] == names


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"label_selector": "bad key!=x"},
            "unable to parse requirement 'bad key!=x' in labelSelector",
        ),
        (
            {"label_selector": "driver=a b"},
            "unable to parse requirement 'driver=a b' in labelSelector",
        ),
        (
            {"field_selector": "spec.driver in (a)"},
            "invalid selector 'spec.driver in (a)' in fieldSelector",
        ),
    ],
)
def test_bad_selector_is_a_400_naming_the_term(
    api: client.ApiClient, query: dict[str, str], message: str
) -> None:
    """A selector term the server cannot parse is a 400 BadRequest quoting the term."""
    with pytest.raises(ApiException) as error:
        list_slices(api, **query)
    assert error.value.status == 400
    status = json.loads(error.value.body)
    assert status["reason"] == "BadRequest" and status["message"] == message


def test_watch_streams_changes_and_bookmarks_until_timeout(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """Watch.stream gets ADDED, MODIFIED, DELETED and bookmarks, and ends at timeoutSeconds."""
    server.apply(slice_obj("old"))
    rv = list_slices(api)["metadata"]["resourceVersion"]

    def mutate() -> None:
        server.apply(slice_obj("new"))
        changed = slice_obj("new")
        changed["spec"]["pool"]["generation"] = 2
        server.apply(changed)
        server.delete("resourceslices", name="old")

    later(0.3, mutate)
    custom = client.CustomObjectsApi(api)
    events = list(
        watch.Watch().stream(
            custom.list_cluster_custom_object,
            GROUP,
            "v1",
            "resourceslices",
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        )
    )
    # The stream ended by itself: one watch request, closed by the server at its timeout.
    watches = [r for r in server.requests if r.query.get("watch") in ("true", "1", "True")]
    assert [r.query.get("timeoutSeconds") for r in watches] == ["1"]
    assert events[-1]["type"] == "BOOKMARK"
    changes = [
        (e["type"], e["raw_object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"
    ]
    assert changes == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "old")]
    bookmarks = [e["raw_object"] for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and list(bookmarks[-1]["metadata"]) == ["resourceVersion"]
    assert bookmarks[-1]["metadata"]["resourceVersion"] == server.resource_version
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


def test_watch_without_version_starts_with_current_state(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch with no resourceVersion first gets synthetic ADDED events for what exists."""
    server.apply(slice_obj("b"))
    server.apply(slice_obj("a"))
    response = stream_lines(api, timeout_seconds=1)
    events = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_watch_from_compacted_version_gets_410_error_event(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch from a version older than the history gets an ERROR event with a 410 Status."""
    server.apply(slice_obj("a"))
    rv = server.resource_version
    server.apply(slice_obj("b"))
    server.compact()
    response = stream_lines(api, resource_version=rv, timeout_seconds=2)
    assert response.status == 200
    events = [json.loads(line) for line in response.read().splitlines()]
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as error:
        list(
            watch.Watch().stream(
                custom.list_cluster_custom_object,
                GROUP,
                "v1",
                "resourceslices",
                resource_version=rv,
                timeout_seconds=2,
            )
        )
    assert error.value.status == 410


def test_history_limit_expires_lagging_versions(tmp_path: Path) -> None:
    """Once more changes than the history limit happened, the oldest versions are Expired."""
    with FakeApiServer(history_limit=3) as server:
        api = config.new_client_from_config(str(server.write_kubeconfig(tmp_path / "kc")))
        start = server.resource_version
        for i in range(5):
            server.apply(slice_obj(f"s{i}"))
        events = [
            json.loads(x) for x in stream_lines(api, resource_version=start).read().splitlines()
        ]
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        recent = str(int(server.resource_version) - 2)
        response = stream_lines(api, resource_version=recent, timeout_seconds=1)
        names = [json.loads(x)["object"]["metadata"]["name"] for x in response.read().splitlines()]
        assert names == ["s3", "s4"]
        api.close()


def test_watch_with_selector_sees_objects_leave(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """An object that stops matching a watch's label selector arrives as DELETED."""
    server.apply(slice_obj("a", driver="gpu.example.com"))
    rv = server.resource_version
    server.apply(slice_obj("a", driver="nic.example.com"))
    server.apply(slice_obj("b", driver="gpu.example.com"))
    response = stream_lines(
        api, resource_version=rv, label_selector="driver=gpu", timeout_seconds=1
    )
    events = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("DELETED", "a"),
        ("ADDED", "b"),
    ]


def test_send_initial_events_ends_with_marked_bookmark(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A streaming list sends the current state, then a bookmark marked initial-events-end."""
    server.apply(slice_obj("a"))
    response = client.ResourceV1Api(api).list_resource_slice(
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    events = [json.loads(line) for line in response.read().splitlines()]
    assert events[0]["type"] == "ADDED"
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert events[1]["type"] == "BOOKMARK" and annotations == {"k8s.io/initial-events-end": "true"}


def test_apply_rejects_bad_objects_naming_the_field(server: FakeApiServer) -> None:
    """apply() refuses malformed objects with an error naming the object and field."""
    no_namespace = claim_obj("c", "x")
    del no_namespace["metadata"]["namespace"]
    with pytest.raises(ValueError, match=r"ResourceClaim/c.*metadata.namespace"):
        server.apply(no_namespace)
    with pytest.raises(ValueError, match="kind"):
        server.apply({"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}})
    with pytest.raises(ValueError, match="apiVersion"):
        server.apply({"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "p"}})
    with pytest.raises(KeyError):
        server.delete("resourceslices", name="never")


def test_apply_keeps_identity_and_counts_generation(server: FakeApiServer) -> None:
    """Updates keep uid and creation time, bump generation on spec change, and raise the rv."""
    first = server.apply(slice_obj("a"))
    same = server.apply(slice_obj("a"))
    changed_obj = slice_obj("a")
    changed_obj["spec"]["pool"]["generation"] = 2
    changed = server.apply(changed_obj)
    assert first["metadata"]["uid"] == changed["metadata"]["uid"]
    assert first["metadata"]["creationTimestamp"] == changed["metadata"]["creationTimestamp"]
    assert [o["metadata"]["generation"] for o in (first, same, changed)] == [1, 1, 2]
    versions = [int(o["metadata"]["resourceVersion"]) for o in (first, same, changed)]
    assert versions == sorted(set(versions))
    assert server.resource_version == changed["metadata"]["resourceVersion"]


def test_bearer_token_is_enforced_when_set(tmp_path: Path) -> None:
    """With a token configured, the kubeconfig carries it and other callers get 401."""
    with FakeApiServer(token="s3cret") as server:
        api = config.new_client_from_config(str(server.write_kubeconfig(tmp_path / "kc")))
        assert list_slices(api)["items"] == []
        http = urllib3.PoolManager()
        response = http.request("GET", f"{server.url}/apis/{GROUP}/v1/resourceslices")
        assert response.status == 401
        api.close()


class ScriptedChurn:
    """Churn that replays fixed steps, standing in for demo.churn.DemoChurn's interface."""

    def __init__(self, steps: list[list[tuple[str, dict[str, Any]]]]) -> None:
        self.steps = steps

    def step(self) -> list[tuple[str, dict[str, Any]]]:
        return self.steps.pop(0) if self.steps else []


def test_churn_loop_applies_steps(server: FakeApiServer) -> None:
    """The churn loop applies added, modified and deleted objects to the server."""
    churn = ScriptedChurn(
        [
            [("ADDED", slice_obj("a")), ("ADDED", slice_obj("b"))],
            [("DELETED", slice_obj("a")), ("DELETED", slice_obj("never-existed"))],
        ]
    )
    loop = ChurnLoop(server, churn, interval=0.05)
    loop.start()
    deadline = time.monotonic() + 3
    while loop.steps < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.stop()
    assert [o["metadata"]["name"] for o in server.objects("resourceslices")] == ["b"]


def test_convert_for_served_keeps_or_drops_without_conversion() -> None:
    """Objects in a served version pass, core objects always pass, DRA objects need DRA."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    rule = {"apiVersion": f"{GROUP}/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"}}
    assert convert_for_served(slice_obj("a"), ("v1", "v1beta1")) == slice_obj("a")
    assert convert_for_served(node, ()) == node
    assert convert_for_served(slice_obj("a"), ()) is None
    assert convert_for_served(rule, ("v1beta1",)) is None


def test_convert_for_served_converts_to_newest_served_version() -> None:
    """A v1 object on a v1beta1-only server is stored in v1beta1's shape (basic devices)."""
    obj = slice_obj("a")
    obj["metadata"]["uid"] = "uid-a"
    obj["spec"].update({"nodeName": "n1", "devices": [{"name": "g0", "attributes": {}}]})
    converted = convert_for_served(obj, ("v1beta1",))
    assert converted is not None
    assert converted["apiVersion"] == f"{GROUP}/v1beta1"
    assert "basic" in converted["spec"]["devices"][0]


def test_cli_rejects_unknown_served_version(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI exits with status 2 and names the bad version."""
    assert cli_main(["--port", "0", "--served", "v9"]) == 2
    assert "'v9'" in capsys.readouterr().err


def test_watch_ends_when_the_client_leaves(server: FakeApiServer, api: client.ApiClient) -> None:
    """Closing a watch on the client side frees the server's stream within a moment."""
    response = stream_lines(api, timeout_seconds=60)
    assert server.wait_for_watches(1)
    response.close()
    deadline = time.monotonic() + 3
    while server.active_watches and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.active_watches == 0


def test_limit_ranges_are_served_like_the_other_core_kinds(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A LimitRange is listed across namespaces and in its own, as core/v1 serves it."""
    server.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "defaults", "namespace": "team"},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m"}}]},
        }
    )
    core = client.CoreV1Api(api)
    listed = raw(core.list_limit_range_for_all_namespaces(_preload_content=False))
    assert [item["metadata"]["name"] for item in listed["items"]] == ["defaults"]
    mine = raw(core.list_namespaced_limit_range("team", _preload_content=False))
    assert mine["items"][0]["spec"]["limits"][0]["defaultRequest"] == {"cpu": "500m"}
