"""The Sync page is live: every change of a kind's sync state but a heartbeat is published."""

from __future__ import annotations

import pytest

from inventory.models import SyncState
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
