"""What a change costs the fake API server's watches, in changes read from its history.

Every open watch looks for the changes after its cursor on every change; the kube-apiserver's
watch cache finds them by searching its buffer, so a change costs the watches the changes they
had not yet seen, not the whole history. Driven over real HTTP by the official client.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from dralib.kube.client import WatchStream
from dralib.kube.fakeapi import FakeApiServer

GROUP = "resource.k8s.io"
# Changes of another kind stored before the watch opens: the history the watch must not reread.
HISTORY = 5000


def slice_obj(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1}},
    }


def pod_obj(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "jobs"}}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    # Bookmarks far apart: nothing but the changes themselves reaches the stream.
    with FakeApiServer(bookmark_interval=600.0, history_limit=2 * HISTORY) as fake:
        for i in range(HISTORY):
            fake.apply(pod_obj(f"pod-{i}"))
        yield fake


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(server.write_kubeconfig(tmp_path / "kc")))
    yield api_client
    api_client.close()


def open_watch(api: client.ApiClient, resource_version: str) -> WatchStream:
    """A watch on slices, its events decoded by the dashboard's own WatchStream."""
    response = client.CustomObjectsApi(api).list_cluster_custom_object(
        GROUP,
        "v1",
        "resourceslices",
        watch=True,
        resource_version=resource_version,
        timeout_seconds=30,
        _preload_content=False,
    )
    return WatchStream(response, path="resourceslices")


def test_a_change_costs_a_watch_the_new_changes_not_the_history(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """Each slice change reaches the slice watch after the server read a handful of changes
    from a history of 5,000 pod changes (a whole pass read all 5,000 per wake)."""
    stream = open_watch(api, server.resource_version)
    events = iter(stream)
    assert server.wait_for_watches(1)
    for i in range(3):
        before = server.history_reads
        stored = server.apply(slice_obj(f"slice-{i}"))
        event = next(events)
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["name"] == f"slice-{i}"
        assert event["object"]["metadata"] == stored["metadata"]
        # Each wake reads the new changes and the one it stops at; the watch also wakes
        # every poll interval with nothing new (one read each).
        assert server.history_reads - before < 50
    stream.close()


def test_a_lagging_watch_reads_back_to_its_cursor_only(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A watch from a version 10 changes back (one slice, nine pods) gets the slice after the
    server read about those 10 changes, not the 5,000 before them."""
    start = server.resource_version
    server.apply(slice_obj("slice-a"))
    for i in range(9):
        server.apply(pod_obj(f"late-{i}"))
    before = server.history_reads
    stream = open_watch(api, start)
    events = iter(stream)
    event = next(events)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "slice-a")
    assert server.history_reads - before < 50
    stream.close()
