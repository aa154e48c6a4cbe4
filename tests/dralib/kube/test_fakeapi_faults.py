"""The fake API server's faults (close, cut, hang, throttle, error) as a client meets them."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from dralib.kube.fakeapi import FakeApiServer
from tests.dralib.kube.fakeapi_requests import (
    GROUP,
    list_slices,
    raw,
    slice_obj,
    stream_lines,
)


def test_fault_close_ends_watch_cleanly_after_k_events(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A close fault ends the stream cleanly after K events, long before its timeout."""
    for i in range(5):
        server.apply(slice_obj(f"s{i}"))
    server.inject_fault("close", resource="resourceslices", verb="watch", after_events=2)
    response = stream_lines(api, timeout_seconds=10)
    # Five objects exist, so a stream that only timed out would have carried all five.
    events = [json.loads(line) for line in response.read().splitlines()]
    assert [e["object"]["metadata"]["name"] for e in events] == ["s0", "s1"]
    assert server.pending_faults == []
    again = stream_lines(api, timeout_seconds=1)
    assert len(again.read().splitlines()) == 5


def test_fault_cut_truncates_mid_chunk(server: FakeApiServer, api: client.ApiClient) -> None:
    """A cut fault leaves half an event on the wire and drops the connection: a client error."""
    for i in range(3):
        server.apply(slice_obj(f"s{i}"))
    server.inject_fault("cut", verb="watch", after_events=1)
    custom = client.CustomObjectsApi(api)
    received = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(
            custom.list_cluster_custom_object, GROUP, "v1", "resourceslices", timeout_seconds=5
        ):
            received.append(event["raw_object"]["metadata"]["name"])
    assert received == ["s0"]


def test_fault_cut_truncates_a_list_body(server: FakeApiServer, api: client.ApiClient) -> None:
    """A cut fault on a list sends half the promised body, which the client cannot read whole."""
    server.apply(slice_obj("a"))
    server.inject_fault("cut", resource="resourceslices", verb="list")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        list_slices(api)
    assert list_slices(api)["items"][0]["metadata"]["name"] == "a"


def test_fault_hang_is_a_read_timeout(server: FakeApiServer, api: client.ApiClient) -> None:
    """A hung watch sends headers and then nothing: the client's read timeout fires."""
    server.apply(slice_obj("a"))
    server.inject_fault("hang", verb="watch", hang_seconds=10)
    response = stream_lines(api, timeout_seconds=30, _request_timeout=(2, 0.5))
    # A hang that ended (after 10 s) would close the stream cleanly: no read timeout.
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        response.read()
    assert server.pending_faults == []


def test_fault_throttle_sends_retry_after(server: FakeApiServer, tmp_path: Path) -> None:
    """A throttle fault answers 429 with a Retry-After header the client exposes."""
    settings = client.Configuration()
    settings.retries = False  # urllib3 would otherwise retry the 429 itself
    path = str(server.write_kubeconfig(tmp_path / "kc"))
    api = config.new_client_from_config(config_file=path, client_configuration=settings)
    server.inject_fault("throttle", resource="resourceslices", retry_after=3, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as error:
            list_slices(api)
        assert error.value.status == 429
        assert error.value.headers["Retry-After"] == "3"
        assert json.loads(error.value.body)["details"]["retryAfterSeconds"] == 3
    assert list_slices(api)["kind"] == "ResourceSliceList"
    api.close()


def test_default_client_waits_out_retry_after(
    server: FakeApiServer, api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With default settings urllib3 honours Retry-After on 429 and the list then succeeds."""
    slept: list[float] = []
    # urllib3's retry module sleeps through its own `time`: record the wait instead of taking it.
    monkeypatch.setattr(
        urllib3.util.retry, "time", SimpleNamespace(sleep=slept.append, time=time.time)
    )
    server.inject_fault("throttle", resource="resourceslices", retry_after=1)
    assert list_slices(api)["kind"] == "ResourceSliceList"
    assert slept == [1.0]
    assert [r.path for r in server.requests].count(f"/apis/{GROUP}/v1/resourceslices") == 2


def test_fault_error_is_a_500_for_matching_resource_only(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """An error fault answers 500 to the resource it names and leaves others alone."""
    server.inject_fault("error", resource="resourceslices")
    assert raw(client.CoreV1Api(api).list_node(_preload_content=False))["items"] == []
    with pytest.raises(ApiException) as error:
        list_slices(api)
    assert error.value.status == 500
    assert json.loads(error.value.body)["reason"] == "InternalError"


def test_stopped_server_refuses_then_restarts_on_same_port(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A stopped server refuses connections; started again it answers on the same port."""
    server.apply(slice_obj("a"))
    port = server.port
    response = stream_lines(api, timeout_seconds=30)
    assert server.wait_for_watches(1)
    server.stop()
    with pytest.raises(urllib3.exceptions.ProtocolError):
        response.read()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        list_slices(api, _request_timeout=1)
    server.start()
    assert server.port == port
    assert [i["metadata"]["name"] for i in list_slices(api)["items"]] == ["a"]
