"""The watch loop against the fake API server, writing into an in-memory sink: no database.

The loop knows HTTP and no model; whatever store implements `Sink` gets the same calls. These
tests hold the loop to the contract a sink relies on: a replace before any batch, batches in
order with their cursor, the cluster's identity, and a cluster change dropping what it had.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from dashboard import scope
from dralib.kube.client import load_client
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.sync.watch import Cursor, KindWatcher, Listing, Sink
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST, wait_for

JSON = dict[str, Any]


@dataclass
class MemorySink:
    """A Sink that keeps one kind's objects by (namespace, name), and every call it got."""

    objects: dict[tuple[str, str], JSON] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    cursor: str = ""
    cluster_uid: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(obj: JSON) -> tuple[str, str]:
        meta = obj["metadata"]
        return meta.get("namespace", ""), meta["name"]

    def open(self) -> Cursor:
        self.calls.append("open")
        return Cursor()

    def close(self) -> None:
        self.calls.append("close")

    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        with self.lock:
            self.calls.append("replace")
            self.objects = {self.key(obj): obj for obj in listing.items}
            self.cursor, self.cluster_uid = listing.resource_version, cluster_uid

    def apply(self, events: list[tuple[str, JSON]], *, resource_version: str, rate: float) -> None:
        with self.lock:
            self.calls.append("apply")
            for kind, obj in events:
                if kind == "DELETED":
                    self.objects.pop(self.key(obj), None)
                else:
                    self.objects[self.key(obj)] = obj
            self.cursor = resource_version

    def bookmark(self, *, rate: float) -> None:
        self.calls.append("bookmark")

    def verified(self) -> None:
        self.calls.append("verified")

    def cursor_invalid(self) -> None:
        self.calls.append("cursor_invalid")

    def cluster_seen(self, cluster_uid: str) -> None:
        self.calls.append("cluster_seen")
        self.cluster_uid = cluster_uid

    def cluster_changed(self, cluster_uid: str) -> None:
        with self.lock:
            self.calls.append("cluster_changed")
            self.objects, self.cursor, self.cluster_uid = {}, "", cluster_uid

    def not_served(self, message: str) -> None:
        self.calls.append("not_served")
        self.objects = {}

    def error(self, message: str) -> None:
        self.calls.append("error")

    def idle(self) -> None:
        pass

    def names(self) -> set[str]:
        with self.lock:
            return {name for _, name in self.objects}


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.3, too_large_wait=0.2) as server:
        yield server


def start(server: FakeApiServer, sink: Sink, tmp_path: Any) -> tuple[threading.Event, Any]:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    stop = threading.Event()
    watcher = KindWatcher(
        KINDS["Node"],
        client_factory=lambda: load_client(kubeconfig=kubeconfig),
        sink=sink,
        stop=stop,
        options=FAST,
    )
    thread = threading.Thread(target=scope.carried(watcher.run), daemon=True)
    thread.start()
    return stop, thread


def server_names(server: FakeApiServer) -> set[str]:
    return {obj["metadata"]["name"] for obj in server.objects("nodes")}


def test_the_loop_keeps_a_sink_equal_to_the_cluster_without_a_database(fake, tmp_path) -> None:
    """List, then follow adds, updates and deletes: the sink ends equal to the server."""
    for i in range(5):
        fake.apply(objects.node(f"node-{i}"))
    sink = MemorySink()
    stop, thread = start(fake, sink, tmp_path)
    wait_for(lambda: sink.names() == server_names(fake))
    fake.apply(objects.node("node-9"))
    fake.apply(objects.node("node-1", ready=False))
    fake.delete("nodes", name="node-0")
    wait_for(lambda: sink.names() == server_names(fake) and sink.cursor == fake.resource_version)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert sink.calls[0] == "open" and sink.calls[-1] == "close"
    # The whole state comes first, then batches: never a batch before the sink was filled.
    assert sink.calls.index("replace") < sink.calls.index("apply")
    assert sink.cluster_uid == fake.cluster_uid
    ready = sink.objects[("", "node-1")]["status"]["conditions"]
    assert any(c["type"] == "Ready" and c["status"] == "False" for c in ready)


def test_another_cluster_at_the_address_empties_the_sink_first(fake, tmp_path) -> None:
    """A new kube-system uid: the sink is told to drop everything before the new list."""
    for i in range(3):
        fake.apply(objects.node(f"old-{i}"))
    sink = MemorySink()
    stop, thread = start(fake, sink, tmp_path)
    wait_for(lambda: sink.names() == server_names(fake))
    port = fake.port
    fake.stop()
    with FakeApiServer(port=port, bookmark_interval=0.3, too_large_wait=0.2) as new:
        new.apply(objects.node("new-0"))
        wait_for(lambda: sink.names() == {"new-0"} and sink.cluster_uid == new.cluster_uid)
        stop.set()
        thread.join(timeout=10)
    changed = sink.calls.index("cluster_changed")
    assert "replace" in sink.calls[changed:]


class TickCounting(KindWatcher):
    """Counts the loop's heartbeat checks: one after every batch, idle ones included."""

    ticks = 0

    def _maybe_heartbeat(self) -> None:
        type(self).ticks += 1
        super()._maybe_heartbeat()


def test_taking_the_kind_over_and_listing_count_as_heartbeats(tmp_path) -> None:
    """A watcher that just opened and listed writes no bookmark in its first quiet seconds:
    fifteen resuming watchers each wrote one amid the backlog they were catching up."""
    with FakeApiServer(bookmark_interval=60.0) as quiet:
        quiet.apply(objects.node("node-0"))
        kubeconfig = quiet.write_kubeconfig(tmp_path / "kubeconfig")
        sink, stop = MemorySink(), threading.Event()
        TickCounting.ticks = 0
        watcher = TickCounting(
            KINDS["Node"],
            client_factory=lambda: load_client(kubeconfig=kubeconfig),
            sink=sink,
            stop=stop,
            options=dataclasses.replace(
                FAST, heartbeat_every=30.0, timeout_seconds=10, read_timeout=10.0
            ),
        )
        thread = threading.Thread(target=scope.carried(watcher.run), daemon=True)
        thread.start()
        # Two idle ticks (a second each) after the list: each asked whether to heartbeat.
        wait_for(lambda: TickCounting.ticks >= 2, timeout=10)
        stop.set()
        thread.join(timeout=10)
    assert sink.calls[:3] == ["open", "cluster_seen", "replace"]
    assert "bookmark" not in sink.calls and "error" not in sink.calls
