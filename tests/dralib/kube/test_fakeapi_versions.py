"""The fake API server answers resourceVersion questions as kube-apiserver does.

Each case follows the upstream sources: the cacher (watch from a future version, NotOlderThan
waits ~3 s then 504 "Too large resource version"), etcd3 storage (Exact reads, expired continue
tokens with a fresh inconsistent token), ListOptions validation (422 Invalid), the WatchList
protocol (initial events, then a bookmark annotated k8s.io/initial-events-end).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.fakeapi.handler import KubeRequestHandler

GROUP = "resource.k8s.io"
WAIT = 0.3  # the server's too_large_wait in these tests (3 s upstream)


def slice_obj(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1}},
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.1, too_large_wait=WAIT) as fake:
        yield fake


def list_slices(api: client.ApiClient, **kwargs: Any) -> dict[str, Any]:
    response = client.ResourceV1Api(api).list_resource_slice(_preload_content=False, **kwargs)
    data: dict[str, Any] = json.loads(response.data)
    return data


def list_error(api: client.ApiClient, **kwargs: Any) -> tuple[ApiException, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        list_slices(api, **kwargs)
    return caught.value, json.loads(caught.value.body)


def watch_events(api: client.ApiClient, **kwargs: Any) -> list[dict[str, Any]]:
    response = client.ResourceV1Api(api).list_resource_slice(
        watch=True, _preload_content=False, **kwargs
    )
    return [json.loads(line) for line in response.read().splitlines() if line.strip()]


def test_watch_from_a_future_version_is_200_and_silence(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch from a version the server has not reached sends nothing, bookmarks included."""
    server.apply(slice_obj("a"))
    future = str(int(server.resource_version) + 50)
    events = watch_events(
        api, resource_version=future, allow_watch_bookmarks=True, timeout_seconds=1
    )
    assert events == []


def test_watch_from_a_future_version_sends_what_comes_after_it(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """Once the server passes the requested version, changes after it stream as usual."""
    future = int(server.resource_version) + 2
    for name in ("a", "b", "c", "d"):
        server.apply(slice_obj(name))
    events = watch_events(api, resource_version=str(future), timeout_seconds=1)
    assert [e["object"]["metadata"]["name"] for e in events] == ["c", "d"]
    assert all(int(e["object"]["metadata"]["resourceVersion"]) > future for e in events)


def test_not_older_than_a_future_version_waits_then_504(
    server: FakeApiServer, api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NotOlderThan a future version waits for the server to catch up, then a 504 Timeout."""
    future = str(int(server.resource_version) + 5)
    waits: list[int] = []
    wait_for_revision = KubeRequestHandler._wait_for_revision

    def recorded(handler: KubeRequestHandler, wanted: int) -> None:
        waits.append(wanted)
        wait_for_revision(handler, wanted)

    monkeypatch.setattr(KubeRequestHandler, "_wait_for_revision", recorded)
    error, status = list_error(
        api, resource_version=future, resource_version_match="NotOlderThan", limit=1
    )
    assert waits == [int(future)]  # it waited for the version, and it never came
    assert error.status == 504 and status["reason"] == "Timeout"
    assert status["message"].startswith(f"Too large resource version: {future}, current: ")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert status["details"]["retryAfterSeconds"] == 1
    assert error.headers["Retry-After"] == "1"


def test_not_older_than_is_answered_once_the_server_catches_up() -> None:
    """A version reached while the list waits is served, at least that new."""
    with FakeApiServer(too_large_wait=5.0) as slow, _client(slow) as slow_api:
        wanted = int(slow.resource_version) + 1
        threading.Timer(0.3, lambda: slow.apply(slice_obj("late"))).start()
        page = list_slices(
            slow_api, resource_version=str(wanted), resource_version_match="NotOlderThan"
        )
        assert int(page["metadata"]["resourceVersion"]) >= wanted
        assert [i["metadata"]["name"] for i in page["items"]] == ["late"]


def test_not_older_than_a_past_version_is_the_current_state(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """NotOlderThan an old (even compacted) version answers the latest state."""
    old = server.resource_version
    server.apply(slice_obj("a"))
    server.compact()
    page = list_slices(api, resource_version=old, resource_version_match="NotOlderThan")
    assert page["metadata"]["resourceVersion"] == server.resource_version
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"]


def test_exact_future_version_is_an_immediate_504(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """Exact reads go to etcd, which refuses a future revision at once, without Retry-After."""
    future = str(int(server.resource_version) + 5)
    error, status = list_error(api, resource_version=future, resource_version_match="Exact")
    assert error.status == 504
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert "Retry-After" not in error.headers


def test_exact_compacted_version_is_410_expired(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """An Exact read of a compacted revision is 410 Expired."""
    old = server.resource_version
    server.apply(slice_obj("a"))
    server.compact()
    error, status = list_error(api, resource_version=old, resource_version_match="Exact")
    assert error.status == 410 and status["reason"] == "Expired"
    assert "too old resource version" in status["message"]


def test_watch_from_a_compacted_version_is_an_expired_error_event(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch from before the history is 200 with one ERROR event carrying a 410 Status."""
    old = server.resource_version
    server.apply(slice_obj("a"))
    server.compact()
    events = watch_events(api, resource_version=old, timeout_seconds=2)
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


def first_page(server: FakeApiServer, api: client.ApiClient) -> str:
    for name in ("a", "b", "c", "d"):
        server.apply(slice_obj(name))
    token: str = list_slices(api, limit=2)["metadata"]["continue"]
    server.delete("resourceslices", name="c")
    server.apply(slice_obj("e"))
    server.compact()
    return token


def test_expired_continue_carries_a_token_for_the_latest_state(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A compacted continue is 410 with a fresh token that goes on at the latest revision."""
    token = first_page(server, api)
    error, status = list_error(api, limit=2, _continue=token)
    assert error.status == 410 and status["reason"] == "Expired"
    assert "inconsistent list" in status["message"]
    rest = list_slices(api, limit=10, _continue=status["metadata"]["continue"])
    assert [i["metadata"]["name"] for i in rest["items"]] == ["d", "e"]
    assert rest["metadata"]["resourceVersion"] == server.resource_version


def test_expired_continue_without_a_fresh_token() -> None:
    """A server configured as older releases answers a plain 410 without a token."""
    with FakeApiServer(continue_expired_token=False) as old_server, _client(old_server) as api:
        token = first_page(old_server, api)
        error, status = list_error(api, limit=2, _continue=token)
        assert error.status == 410 and status["reason"] == "Expired"
        assert "continue" not in (status.get("metadata") or {})


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        (
            {"resource_version_match": "NotOlderThan"},
            "resourceVersionMatch",
            "forbidden unless resourceVersion is provided",
        ),
        (
            {"resource_version": "0", "resource_version_match": "Exact"},
            "resourceVersionMatch",
            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            {"resource_version_match": "Sometime", "resource_version": "1"},
            "resourceVersionMatch",
            'Unsupported value: "Sometime"',
        ),
    ],
)
def test_list_options_rules_are_422_invalid(
    server: FakeApiServer, api: client.ApiClient, query: dict[str, str], field: str, message: str
) -> None:
    """Broken ListOptions rules are 422 Invalid naming the field, as the API server validates."""
    error, status = list_error(api, **query)
    assert error.status == 422 and status["reason"] == "Invalid"
    assert message in status["message"]
    assert status["details"]["kind"] == "ListOptions"
    assert [c["field"] for c in status["details"]["causes"]] == [field]


def test_resource_version_match_with_continue_is_422(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """resourceVersionMatch next to a continue token is forbidden."""
    for name in ("a", "b"):
        server.apply(slice_obj(name))
    token = list_slices(api, limit=1)["metadata"]["continue"]
    error, status = list_error(
        api, limit=1, _continue=token, resource_version="1", resource_version_match="Exact"
    )
    assert error.status == 422
    assert "forbidden when continue is provided" in status["message"]


def test_resource_version_with_continue_is_400(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A resourceVersion beside a continue token is a storage-level 400 BadRequest."""
    for name in ("a", "b"):
        server.apply(slice_obj(name))
    token = list_slices(api, limit=1)["metadata"]["continue"]
    error, status = list_error(api, limit=1, _continue=token, resource_version="5")
    assert error.status == 400
    assert status["message"] == "specifying resource version is not allowed when using continue"


def test_watch_options_rules_are_422_invalid(server: FakeApiServer, api: client.ApiClient) -> None:
    """A watch with resourceVersionMatch needs sendInitialEvents, and sendInitialEvents needs
    NotOlderThan."""
    with pytest.raises(ApiException) as without_initial:
        watch_events(api, resource_version_match="NotOlderThan", timeout_seconds=1)
    assert without_initial.value.status == 422
    assert (
        "unless sendInitialEvents is provided" in json.loads(without_initial.value.body)["message"]
    )
    with pytest.raises(ApiException) as without_match:
        watch_events(api, send_initial_events=True, timeout_seconds=1)
    assert without_match.value.status == 422
    assert (
        "requires setting resourceVersionMatch to NotOlderThan"
        in json.loads(without_match.value.body)["message"]
    )


def test_send_initial_events_on_a_list_is_422(server: FakeApiServer, api: client.ApiClient) -> None:
    """sendInitialEvents is for watches only."""
    error, status = list_error(api, send_initial_events=True)
    assert error.status == 422 and "sendInitialEvents is forbidden for list" in status["message"]


def test_watch_list_sends_state_then_the_annotated_bookmark(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch list streams every object, an initial-events-end bookmark, then changes."""
    for name in ("a", "b"):
        server.apply(slice_obj(name))
    at = server.resource_version
    threading.Timer(0.3, lambda: server.apply(slice_obj("c"))).start()
    events = watch_events(
        api,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    )
    kinds = [(e["type"], e["object"]["metadata"].get("name")) for e in events]
    assert kinds[:3] == [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
    marker = events[2]["object"]["metadata"]
    assert marker["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert marker["resourceVersion"] == at
    assert ("ADDED", "c") in kinds[3:]


def test_watch_list_from_a_future_version_is_a_504_error_event(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch list that cannot be served fresh enough fails with a Too large ERROR event."""
    future = str(int(server.resource_version) + 5)
    events = watch_events(
        api,
        send_initial_events=True,
        resource_version=future,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=2,
    )
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 504
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_watch_list_is_422_where_the_feature_is_off() -> None:
    """Without the WatchList feature, sendInitialEvents on a watch is 422 Invalid."""
    with FakeApiServer(watch_list=False) as old_server, _client(old_server) as api:
        with pytest.raises(ApiException) as caught:
            watch_events(
                api,
                send_initial_events=True,
                resource_version_match="NotOlderThan",
                allow_watch_bookmarks=True,
                timeout_seconds=1,
            )
        assert caught.value.status == 422
        assert "WatchList feature gate" in json.loads(caught.value.body)["message"]


def test_send_initial_events_false_starts_from_now(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """sendInitialEvents=false without a version streams only changes made after the start."""
    server.apply(slice_obj("old"))
    threading.Timer(0.3, lambda: server.apply(slice_obj("new"))).start()
    events = watch_events(
        api,
        send_initial_events=False,
        resource_version_match="NotOlderThan",
        timeout_seconds=1,
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "new")]


def test_cluster_identity_is_the_kube_system_uid(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """kube-system exists with the server's cluster uid; a new server is another cluster."""
    namespace = client.CoreV1Api(api).read_namespace("kube-system", _preload_content=False)
    assert json.loads(namespace.data)["metadata"]["uid"] == server.cluster_uid
    with FakeApiServer() as other:
        assert other.cluster_uid != server.cluster_uid


def test_restore_goes_back_to_the_backup_revision(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """After a restore the revision and objects are the backup's, and the history is gone."""
    server.apply(slice_obj("a"))
    backup = server.backup()
    server.apply(slice_obj("b"))
    server.delete("resourceslices", name="a")
    ahead = server.resource_version
    server.restore(backup)
    assert int(server.resource_version) < int(ahead)
    assert [o["metadata"]["name"] for o in server.objects("resourceslices")] == ["a"]
    error, _ = list_error(api, resource_version=ahead, resource_version_match="NotOlderThan")
    assert error.status == 504


@contextlib.contextmanager
def _client(server: FakeApiServer) -> Iterator[client.ApiClient]:
    with tempfile.TemporaryDirectory() as folder:
        path = server.write_kubeconfig(Path(folder) / "kubeconfig.yaml")
        api_client = config.new_client_from_config(config_file=str(path))
        try:
            yield api_client
        finally:
            api_client.close()
