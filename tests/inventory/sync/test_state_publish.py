"""The Sync page is live: every change of a kind's sync state but a heartbeat is published."""

from __future__ import annotations

import pytest

from inventory.models import Node, SyncState
from inventory.sync.watch import state


@pytest.fixture
def published(monkeypatch) -> list[dict]:
    sent: list[dict] = []
    monkeypatch.setattr(state, "publish_changes", lambda changes: sent.append(dict(changes)))
    return sent


@pytest.mark.django_db
def test_state_changes_publish_the_sync_topic(published) -> None:
    """List, verification, errors and not-served each tell `sync` followers which kind moved."""
    SyncState.objects.create(kind="Node", watcher="w1")
    state.record_list(
        "Node", watcher="w1", served_version="v1", resource_version="10", cluster_uid="c1"
    )
    state.record_verified("Node", watcher="w1")
    state.record_error("Node", watcher="w1", message="connection refused")
    state.record_not_served("Node", watcher="w1", message="not served")
    assert published == [{"sync": ["Node"]}] * 4


@pytest.mark.django_db
def test_heartbeats_and_lost_rows_publish_nothing(published) -> None:
    """A heartbeat is not news; an error for a row another watcher owns changes nothing."""
    SyncState.objects.create(kind="Node", watcher="w1")
    state.heartbeat("Node", watcher="w1", rate=1.5)
    state.record_error("Node", watcher="someone-else", message="x")
    assert published == []
    assert SyncState.objects.get(kind="Node").last_error == ""


@pytest.mark.django_db(transaction=True)
def test_stored_counts_move_by_the_batch_without_counting_the_table(published) -> None:
    """No batch counts the kind's table: creates and deletes move the stored count by their
    numbers, updates leave it alone, and it equals the table's count after each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inventory.sync.watch import DatabaseSink

    def node(name: str, rv: str, **labels: str) -> dict:
        meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": rv, "labels": labels}
        return {"apiVersion": "v1", "kind": "Node", "metadata": meta}

    def counted() -> list[str]:
        return [
            q["sql"]
            for q in queries
            if 'SELECT COUNT(*) AS "__count" FROM "inventory_node"' in q["sql"]
        ]

    sink = DatabaseSink("Node", watcher="w1")
    sink.open()
    with CaptureQueriesContext(connection) as queries:
        sink.apply(
            [("ADDED", node("a", "1")), ("ADDED", node("b", "2"))], resource_version="2", rate=0
        )
    assert not counted() and SyncState.objects.get(kind="Node").object_count == 2
    with CaptureQueriesContext(connection) as queries:
        sink.apply([("MODIFIED", node("a", "3", team="ml"))], resource_version="3", rate=0)
    assert not counted() and SyncState.objects.get(kind="Node").object_count == 2
    with CaptureQueriesContext(connection) as queries:
        sink.apply([("DELETED", node("b", "4"))], resource_version="4", rate=0)
    assert not counted() and SyncState.objects.get(kind="Node").object_count == 1
    # A recreate without its DELETED (a new uid under a stored name) replaces the row.
    recreated = node("a", "5")
    recreated["metadata"]["uid"] = "uid-a-second"
    with CaptureQueriesContext(connection) as queries:
        sink.apply(
            [("ADDED", recreated), ("ADDED", node("c", "6")), ("DELETED", node("zz", "7"))],
            resource_version="7",
            rate=0,
        )
    assert not counted()
    assert SyncState.objects.get(kind="Node").object_count == Node.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_relist_counts_the_table_again(published) -> None:
    """A count that drifted (rows written behind the watcher's back) is counted afresh by
    the next relist."""
    from inventory.sync.watch import DatabaseSink

    sink = DatabaseSink("Node", watcher="w1")
    sink.open()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "uid": "uid-a"}}
    sink.apply([("ADDED", node)], resource_version="1", rate=0)
    SyncState.objects.filter(kind="Node").update(object_count=7)
    state.record_list("Node", watcher="w1", served_version="v1", resource_version="2")
    assert SyncState.objects.get(kind="Node").object_count == Node.objects.count() == 1
