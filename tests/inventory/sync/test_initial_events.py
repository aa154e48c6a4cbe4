"""The start of a watch list, fed canned events: the state, its version, unsupported servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dralib.kube import client as client_module
from dralib.kube.client import ApiStatusError, KubeClient, TransportError
from dralib.kube.fakeapi import FakeApiServer
from inventory.sync.watch import CannedSource, StreamSource
from inventory.sync.watch.events import (
    HOLD_BLOCK_BYTES,
    INITIAL_EVENTS_END,
    HeldLines,
    WatchListUnsupported,
    batch_events,
    encode_event,
    initial_events,
)
from tests.inventory.sync import objects

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
    assert state is not None and state.count == 2
    items = list(state.take())
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert state.resource_version == "9"
    assert items[0]["kind"] == "Node" and items[0]["apiVersion"] == "v1"
    (batch,) = list(batch_events(source, max_delay=10.0, **OPTIONS))
    assert [(t, o["metadata"]["name"]) for t, o in batch.events] == [("DELETED", "a")]
    assert batch.resource_version == "10"


def test_an_empty_cluster_is_just_the_marker() -> None:
    """No objects: the marker alone gives the version."""
    state = initial_events(CannedSource([end_marker(3)]), **OPTIONS)
    assert state is not None and list(state.take()) == [] and state.resource_version == "3"


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
    """2,000 similar pods are held in a quarter of their lines' bytes (at most one block
    uncompressed at any time); `take` empties the hold as it goes."""
    pods = []
    for i in range(2000):
        pod = event("ADDED", f"pod-{i:04}", i + 1)
        pod["object"]["spec"] = {
            "nodeName": f"node-{i % 7}",
            "containers": [{"name": "main", "image": "registry.example/app:1.2.3"}] * 3,
        }
        pods.append(pod)
    huge = 2**70
    pods[5]["object"]["spec"]["futureField"] = huge
    lines = [encode_event(pod) for pod in pods]
    held = HeldLines()
    received = 0
    for line in lines:
        held.append(line)
        received += len(line) + 1
        # Compressed so far, plus the open block: never the lines received.
        assert held.held_bytes <= received // 4 + HOLD_BLOCK_BYTES
    assert received > 4 * HOLD_BLOCK_BYTES and held.held_bytes < received // 4
    state = initial_events(CannedSource([*lines, end_marker(2001)]), **OPTIONS)
    assert state is not None and state.count == 2000
    taken = state.take()
    first = next(taken)
    assert first["metadata"]["name"] == "pod-0000" and state.count == 0
    assert state.held.held_bytes < held.held_bytes
    rest = list(taken)
    assert [pod["metadata"]["name"] for pod in rest] == [f"pod-{i:04}" for i in range(1, 2000)]
    assert state.held.held_bytes == 0
    # An integer past 64 bits comes back exact, not as a float.
    assert rest[4]["spec"]["futureField"] == huge


def test_a_small_state_is_held_as_received() -> None:
    """Under a block, the lines are held as they came: nothing is compressed."""
    held = HeldLines()
    lines = [encode_event(event("ADDED", f"n-{i}", i)) for i in range(10)]
    for line in lines:
        held.append(line)
    assert held.blocks == [] and held.held_bytes == sum(len(line) + 1 for line in lines)
    assert list(held.take()) == lines


def test_added_lines_written_otherwise_are_decoded_and_held() -> None:
    """A server writing spaces or another key order is understood, its lines still held."""
    spaced = json.dumps(event("ADDED", "spaced", 2)).encode()
    reordered = b'{"object":{"metadata":{"name":"reordered"}},"type":"ADDED"}'
    state = initial_events(CannedSource([spaced, reordered, end_marker(3)]), **OPTIONS)
    assert state is not None
    assert [obj["metadata"]["name"] for obj in state.take()] == ["spaced", "reordered"]
    unsupported = json.dumps(event("MODIFIED", "a", 4)).encode()
    with pytest.raises(WatchListUnsupported):
        initial_events(CannedSource([spaced, unsupported, end_marker(9)]), **OPTIONS)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"ADDED","object":{"metadata":{"name":"cut"',
        b'{"type":"ADDED","object":{"metadata":{}},"type":"DELETED"}',
    ],
)
def test_a_held_line_that_is_no_added_event_fails_when_taken(line: bytes) -> None:
    """A line held on its first bytes that turns out not to be an ADDED event is a transport
    error, raised while the state is taken (the replace it feeds then stores nothing)."""
    state = initial_events(CannedSource([line, end_marker(3)]), **OPTIONS)
    assert state is not None and state.count == 1
    with pytest.raises(TransportError):
        list(state.take())


def test_a_watch_list_decodes_each_event_once(
    server: FakeApiServer,
    client_factory: Callable[[], KubeClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over real HTTP, each object of the initial state is decoded once, when taken, and the
    events after the marker once each, as they are read."""
    for i in range(300):
        server.apply(objects.node(f"node-{i:03}"))
    decoded: list[bytes] = []
    loads = client_module.loads

    def counting(data: bytes) -> Any:
        decoded.append(bytes(data))
        return loads(data)

    monkeypatch.setattr(client_module, "loads", counting)
    query: dict[str, str | int | bool] = {
        "watch": True,
        "sendInitialEvents": True,
        "allowWatchBookmarks": True,
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": 5,
    }
    stream = client_factory().watch("/api/v1/nodes", query, read_timeout=5)
    source = StreamSource(stream, name="Node", initial=True)
    try:
        state = initial_events(source, **OPTIONS)
        assert state is not None and state.count == 300
        # Only the marker was decoded to hold the state.
        assert len(decoded) == 1 and INITIAL_EVENTS_END.encode() in decoded[0]
        names = [obj["metadata"]["name"] for obj in state.take()]
        assert names == [f"node-{i:03}" for i in range(300)]
        assert len(decoded) == 301
        server.delete("nodes", name="node-007")
        change = source.next_event(5.0)
        while isinstance(change, dict) and change["type"] == "BOOKMARK":
            change = source.next_event(5.0)
        assert isinstance(change, dict) and change["type"] == "DELETED"
        assert sum(b'"DELETED"' in line for line in decoded) == 1
    finally:
        source.close()
