"""The start of a watch list, fed canned events: the state, its version, unsupported servers."""

from __future__ import annotations

import json

import pytest

from dralib.kube.client import ApiStatusError, TransportError
from inventory.sync.watch import CannedSource
from inventory.sync.watch.events import WatchListUnsupported, batch_events, initial_events

OPTIONS = {"kind": "Node", "api_version": "v1", "path": "/api/v1/nodes"}


def event(kind: str, name: str, rv: int) -> dict:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": str(rv)}}}


def end_marker(rv: int) -> dict:
    metadata = {"resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}
    return {"type": "BOOKMARK", "object": {"kind": "Node", "metadata": metadata}}


def test_state_ends_at_the_annotated_bookmark_and_the_stream_goes_on() -> None:
    """ADDED events up to the marker are the state at its version; later events stay unread."""
    source = CannedSource(
        [
            event("ADDED", "a", 5),
            None,
            event("ADDED", "b", 7),
            end_marker(9),
            event("DELETED", "a", 10),
        ]
    )
    state = initial_events(source, **OPTIONS)
    assert state is not None
    assert [i["metadata"]["name"] for i in state.items] == ["a", "b"]
    assert state.resource_version == "9"
    assert state.items[0]["kind"] == "Node" and state.items[0]["apiVersion"] == "v1"
    (batch,) = list(batch_events(source, max_delay=10.0, **OPTIONS))
    assert [(t, o["metadata"]["name"]) for t, o in batch.events] == [("DELETED", "a")]
    assert batch.resource_version == "10"


def test_an_empty_cluster_is_just_the_marker() -> None:
    """No objects: the marker alone gives the version."""
    state = initial_events(CannedSource([end_marker(3)]), **OPTIONS)
    assert state is not None and state.items == [] and state.resource_version == "3"


@pytest.mark.parametrize(
    "first",
    [
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "4"}}},
        event("MODIFIED", "a", 4),
        event("DELETED", "a", 4),
    ],
)
def test_a_server_that_ignores_send_initial_events_is_unsupported(first: dict) -> None:
    """A plain bookmark or a change before the marker shows the server has no watch lists."""
    with pytest.raises(WatchListUnsupported):
        initial_events(CannedSource([event("ADDED", "a", 2), first, end_marker(9)]), **OPTIONS)


def test_an_error_event_raises_its_status() -> None:
    """An ERROR event (e.g. Too large resource version) raises the error it carries."""
    status = {
        "kind": "Status",
        "code": 504,
        "reason": "Timeout",
        "message": "Too large resource version: 20, current: 9",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge"}], "retryAfterSeconds": 1},
    }
    with pytest.raises(ApiStatusError) as caught:
        initial_events(CannedSource([{"type": "ERROR", "object": status}]), **OPTIONS)
    assert caught.value.version_too_large and caught.value.retry_after == 1


def test_a_stream_ending_before_the_marker_is_a_transport_error() -> None:
    """An end before the marker may be a cut: retried, not taken as unsupported."""
    with pytest.raises(TransportError):
        initial_events(CannedSource([event("ADDED", "a", 2)]), **OPTIONS)


def test_stop_returns_none() -> None:
    """A stop request ends the wait without a state."""
    assert initial_events(CannedSource([None, None]), stop=lambda: True, **OPTIONS) is None


@pytest.mark.parametrize(
    "message",
    [
        "too old resource version: 1005 (1010)",  # the watch cache names its oldest version
        "The resourceVersion for the provided watch is too old.",  # etcd3 storage does not
    ],
)
def test_expired_watch_is_gone_with_or_without_the_oldest_version(message: str) -> None:
    """Both wordings of 410 Expired mean the same: relist."""
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": message}
    source = CannedSource([event("MODIFIED", "a", 1006), {"type": "ERROR", "object": status}])
    batches = batch_events(source, max_delay=10.0, **OPTIONS)
    assert [len(b.events) for b in [next(batches)]] == [1]
    with pytest.raises(ApiStatusError) as caught:
        next(batches)
    assert caught.value.gone and caught.value.message == message


def test_the_state_is_held_compressed_and_handed_out_once() -> None:
    """200 similar pods are held in fewer bytes than their JSON; `take` empties the hold."""
    pods = []
    for i in range(200):
        pod = event("ADDED", f"pod-{i:03}", i + 1)
        pod["object"]["spec"] = {
            "nodeName": f"node-{i % 7}",
            "containers": [{"name": "main", "image": "registry.example/app:1.2.3"}] * 3,
        }
        pods.append(pod)
    huge = 2**70
    pods[5]["object"]["spec"]["futureField"] = huge
    state = initial_events(CannedSource([*pods, end_marker(900)]), **OPTIONS)
    assert state is not None
    held = sum(len(entry) for entry in state.packed)
    as_json = sum(len(json.dumps(p["object"])) for p in pods)
    assert held < as_json
    taken = state.take()
    first = next(taken)
    assert first["metadata"]["name"] == "pod-000" and state.packed == []
    rest = list(taken)
    assert len(rest) == 199
    # An integer past 64 bits comes back exact, not as a float.
    assert rest[4]["spec"]["futureField"] == huge
