"""A paginated relist streams its pages into the sink: one page held, the replace atomic.

The loop fetches the next page only when the sink has taken the previous one's objects, so a
relist of 150,000 pods holds a page, not the list; the sink writes them in one transaction, so
a page the server refuses mid-list leaves the stored objects (and the cursor) as they were.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dralib.kube.client import ApiStatusError, load_client
from dralib.kube.discovery import discover
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.models import Node, SyncState
from inventory.sync.watch import DatabaseSink, KindWatcher, Listing, write_guard
from inventory.sync.watch import state as watch_state
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST
from tests.inventory.sync.test_loop_sink import MemorySink

PAGE = 10
OPTIONS = dataclasses.replace(FAST, page_size=PAGE, watch_list=False)

JSON = dict[str, Any]


def _watcher(server: FakeApiServer, sink: Any, kubeconfig: Any) -> KindWatcher:
    watcher = KindWatcher(
        KINDS["Node"],
        client_factory=lambda: load_client(kubeconfig=kubeconfig),
        sink=sink,
        stop=threading.Event(),
        options=OPTIONS,
    )
    watcher.client = watcher.client_factory()
    watcher.version = discover(watcher.client, [KINDS["Node"]])["Node"].version
    return watcher


def _list_requests(server: FakeApiServer) -> int:
    return sum(
        1
        for r in server.requests
        if r.method == "GET" and r.path.endswith("/nodes") and "limit" in r.query
    )


@dataclasses.dataclass
class PagedSink(MemorySink):
    """A MemorySink that notes, for every object it takes, how many pages were fetched."""

    server: FakeApiServer | None = None
    seen: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)

    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        def counted() -> Iterator[JSON]:
            for index, item in enumerate(listing.items):
                assert self.server is not None
                self.seen.append((index, listing.pages, _list_requests(self.server)))
                yield item

        super().replace(
            Listing(items=counted(), resource_version=""),
            served_version=served_version,
            cluster_uid=cluster_uid,
        )
        self.cursor = listing.resource_version


def test_the_loop_holds_one_page_while_the_sink_writes(server, kubeconfig) -> None:
    """Object i reaches the sink when at most i // page + 1 pages were asked for."""
    for i in range(95):
        server.apply(objects.node(f"node-{i:03}"))
    sink = PagedSink(server=server)
    watcher = _watcher(server, sink, kubeconfig)
    before = _list_requests(server)
    watcher.relist()
    assert len(sink.seen) == 95
    for index, pages, requests in sink.seen:
        assert pages == index // PAGE + 1
        assert requests - before == pages
    assert sink.names() == {f"node-{i:03}" for i in range(95)}
    assert sink.cursor == watcher.cursor == server.resource_version


class FailingMidList(DatabaseSink):
    """Injects a server error for the next page once `after` objects were taken."""

    def __init__(self, server: FakeApiServer, *, after: int) -> None:
        super().__init__("Node", watcher="relist-test")
        self.server = server
        self.after = after

    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        items = listing.items

        def failing() -> Iterator[JSON]:
            for index, item in enumerate(items):
                if index == self.after:
                    self.server.inject_fault("error", resource="nodes", verb="list")
                yield item

        listing.items = failing()
        super().replace(listing, served_version=served_version, cluster_uid=cluster_uid)


@pytest.mark.django_db(transaction=True)
def test_a_page_refused_mid_list_leaves_the_stored_objects_as_they_were(server, kubeconfig) -> None:
    """A 500 on page 3 rolls the whole replace back; the next relist deletes what went away."""
    for i in range(25):
        server.apply(objects.node(f"node-{i:03}"))
    first = FailingMidList(server, after=10_000)
    with write_guard():
        watch_state.claim_kind("Node", watcher="relist-test")
    _watcher(server, first, kubeconfig).relist()
    stored = set(Node.objects.values_list("name", flat=True))
    cursor = SyncState.objects.get(kind="Node").resource_version
    assert stored == {f"node-{i:03}" for i in range(25)}

    server.delete("nodes", name="node-000")
    for i in range(25, 40):
        server.apply(objects.node(f"node-{i:03}"))
    failing = _watcher(server, FailingMidList(server, after=2 * PAGE - 3), kubeconfig)
    with pytest.raises(ApiStatusError) as refused:
        failing.relist()
    assert refused.value.status == 500
    # Nothing of the two pages written before the refusal is left: not the new nodes, and the
    # node the server deleted is still stored, as is the cursor.
    assert set(Node.objects.values_list("name", flat=True)) == stored
    assert SyncState.objects.get(kind="Node").resource_version == cursor

    again = _watcher(server, FailingMidList(server, after=10_000), kubeconfig)
    again.relist()
    assert set(Node.objects.values_list("name", flat=True)) == {
        f"node-{i:03}" for i in range(1, 40)
    }
    assert SyncState.objects.get(kind="Node").resource_version == server.resource_version
