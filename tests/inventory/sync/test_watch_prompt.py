"""A lone change reaches the sink on its own: nothing on the path waits for a second event.

The fake API server writes each event as its own chunk, the client reads a chunk as soon as it
arrives, and the batching ends a batch once the stream is quiet (`linger`). With `max_delay` an
hour and no bookmarks, each change below can only be committed because its own event got
through, never because another event, a bookmark or a time window pushed it out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dashboard import scope
from dralib.kube.client import load_client
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.sync.watch import Cursor, KindWatcher, Listing
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST, wait_for

JSON = dict[str, Any]
# A batch could only end by its size or by the stream going quiet: max_delay is an hour.
PATIENT = replace(FAST, max_delay=3600.0, heartbeat_every=3600.0, timeout_seconds=600)


class BatchSink:
    """A Sink that records the names in each applied batch and the versions stored with them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listed = threading.Event()
        self.batches: list[list[str]] = []
        self.versions: list[str] = []

    def open(self) -> Cursor:
        return Cursor()

    def close(self) -> None:
        pass

    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        for _ in listing.items:
            pass
        self.listed.set()

    def apply(self, events: list[tuple[str, JSON]], *, resource_version: str, rate: float) -> None:
        with self.lock:
            self.batches.append([obj["metadata"]["name"] for _, obj in events])
            self.versions.append(resource_version)

    def recorded(self) -> tuple[list[list[str]], list[str]]:
        with self.lock:
            return [list(b) for b in self.batches], list(self.versions)

    def bookmark(self, *, rate: float) -> None:
        pass

    def verified(self) -> None:
        pass

    def cursor_invalid(self) -> None:
        pass

    def cluster_seen(self, cluster_uid: str) -> None:
        pass

    def cluster_changed(self, cluster_uid: str) -> None:
        pass

    def not_served(self, message: str) -> None:
        pass

    def error(self, message: str) -> None:
        pass

    def idle(self) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    # Bookmarks ten minutes apart: none reaches the stream while the test runs.
    with FakeApiServer(bookmark_interval=600.0) as server:
        yield server


@pytest.mark.parametrize("watch_list", [True, False], ids=["watch-list", "list-then-watch"])
def test_each_lone_change_is_committed_before_the_next_is_made(
    fake: FakeApiServer, tmp_path: Path, watch_list: bool
) -> None:
    """Three changes, each made only after the one before was committed: three batches of one,
    each stored with its own change's resourceVersion."""
    fake.watch_list = watch_list
    fake.apply(objects.node("node-0"))
    recorder = BatchSink()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    stop = threading.Event()
    watcher = KindWatcher(
        KINDS["Node"],
        client_factory=lambda: load_client(kubeconfig=kubeconfig),
        sink=recorder,
        stop=stop,
        options=PATIENT,
    )
    thread = threading.Thread(target=scope.carried(watcher.run), daemon=True)
    thread.start()
    try:
        assert recorder.listed.wait(10)
        assert fake.wait_for_watches(1)
        made: list[str] = []
        for i in range(1, 4):
            stored = fake.apply(objects.node(f"node-{i}"))
            made.append(stored["metadata"]["resourceVersion"])
            wait_for(lambda n=i: len(recorder.recorded()[0]) == n)
        batches, versions = recorder.recorded()
        assert batches == [["node-1"], ["node-2"], ["node-3"]]
        assert versions == made
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
