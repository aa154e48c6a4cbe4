"""The database converges when the cluster behind the address changes under the stored cursor.

A new cluster at the same address (lower resourceVersions, another kube-system uid), an etcd
restore (same cluster, versions go back, some objects differ) and an API server that is down
for a while. Each test compares database and server object by object: uid, resourceVersion and
the stored JSON.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from dashboard import scope
from dralib.kube.client import KubeClient, load_client
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.models import SyncState
from inventory.sync import handler_for
from inventory.sync.watch import DatabaseSink, KindWatcher, write_guard
from inventory.sync.watch import state as watch_state
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST, server_state, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KINDS_UNDER_TEST = ("Node", "ResourceSlice", "ResourceClaim", "Pod")
RESUME = replace(FAST, list_on_start=False)


def populate(server: FakeApiServer, *, prefix: str = "", count: int = 3) -> None:
    for i in range(count):
        server.apply(objects.node(f"{prefix}node-{i}"))
        server.apply(objects.resource_slice(f"{prefix}node-{i}-gpu", node_name=f"{prefix}node-{i}"))
        server.apply(objects.resource_claim("team-a", f"{prefix}claim-{i}"))
        server.apply(objects.pod("team-a", f"{prefix}pod-{i}", claim=f"{prefix}claim-{i}"))


def age(server: FakeApiServer, *, changes: int) -> None:
    """Push the server's resourceVersion up by flipping node-0's readiness."""
    for step in range(changes):
        server.apply(objects.node("node-0", ready=step % 2 == 0))
    server.apply(objects.node("node-0"))


def server_objects(server: FakeApiServer, kind: str) -> dict[str, tuple[str, Any]]:
    wanted = server_state(server, kind)
    found = {}
    for obj in server.objects(KINDS[kind].plural):
        uid = obj["metadata"]["uid"]
        if uid in wanted:
            found[uid] = (obj["metadata"]["resourceVersion"], obj)
    return found


def db_objects(kind: str) -> dict[str, tuple[str, Any]]:
    rows = handler_for(kind).model.objects.values_list("uid", "resource_version", "raw")
    return {uid: (rv, raw) for uid, rv, raw in rows}


def wait_equal(server: FakeApiServer, *kinds: str, timeout: float = 15.0) -> None:
    """Wait until every kind's rows equal the server's objects: uid, version and JSON."""

    def equal() -> bool:
        return all(db_objects(kind) == server_objects(server, kind) for kind in kinds)

    deadline = time.monotonic() + timeout
    while True:
        with write_guard():
            if equal():
                return
            if time.monotonic() > deadline:
                for kind in kinds:
                    stored, wanted = db_objects(kind), server_objects(server, kind)
                    assert sorted(stored) == sorted(wanted), f"{kind}: other objects"
                    for uid, (rv, raw) in wanted.items():
                        assert stored[uid][0] == rv, f"{kind} {uid}: resourceVersion"
                        assert stored[uid][1] == raw, f"{kind} {uid}: content"
        time.sleep(0.05)


def state_of(kind: str) -> SyncState:
    with write_guard():
        return SyncState.objects.get(kind=kind)


def fresh_server(port: int, **kwargs: Any) -> FakeApiServer:
    return FakeApiServer(port=port, bookmark_interval=0.3, too_large_wait=0.2, **kwargs)


def test_restart_against_a_new_cluster_converges(server, watchers) -> None:
    """A dashboard restarted against a new cluster at lower versions shows only its objects.

    The bug of the issue: the old loop resumed the stored cursor, watched "from the future",
    got silence and kept the old cluster's objects.
    """
    populate(server)
    age(server, changes=60)
    watchers.start(*KINDS_UNDER_TEST)
    wait_equal(server, *KINDS_UNDER_TEST)
    watchers.stop()
    cursor = state_of("Node").resource_version
    server.stop()
    with fresh_server(server.port) as new:
        populate(new, prefix="new-", count=2)
        assert int(new.resource_version) < int(cursor)
        assert new.cluster_uid != server.cluster_uid
        watchers.start(*KINDS_UNDER_TEST)
        wait_equal(new, *KINDS_UNDER_TEST)
        new.apply(objects.node("new-node-9"))
        new.delete("resourceclaims", name="new-claim-0", namespace="team-a")
        wait_equal(new, *KINDS_UNDER_TEST)
        assert state_of("Node").cluster_uid == new.cluster_uid
        watchers.stop()


@pytest.mark.parametrize("options", [FAST, RESUME], ids=["list-on-start", "resume"])
def test_new_cluster_while_running_even_ahead_of_the_cursor(server, watchers, options) -> None:
    """A new cluster at the address, with versions past the cursor, is told by its uid."""
    populate(server)
    watchers.start("Node", "ResourceSlice", options=options)
    wait_equal(server, "Node", "ResourceSlice")
    server.stop()
    with fresh_server(server.port, first_revision=int(server.resource_version) + 500) as new:
        populate(new, prefix="new-", count=2)
        wait_equal(new, "Node", "ResourceSlice")
        assert {state_of(k).cluster_uid for k in ("Node", "ResourceSlice")} == {new.cluster_uid}
        watchers.stop()


def restore_with_differences(server: FakeApiServer, *, watchers, restart: bool) -> None:
    """Back up, change (synced), restore: then change some objects otherwise than before."""
    backup = server.backup()
    age(server, changes=30)
    server.delete("resourceslices", name="node-2-gpu")
    server.apply(objects.node("node-lost"))
    wait_equal(server, "Node", "ResourceSlice")
    if restart:
        watchers.stop()
    server.stop()
    server.restore(backup)
    # After the restore: a few changes, fewer than were lost, so versions stay behind.
    server.apply(objects.resource_slice("node-1-gpu", node_name="node-1", devices=4))
    server.delete("nodes", name="node-2")
    server.apply(objects.node("node-restored"))


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted-resume"])
def test_etcd_restore_to_an_older_revision_converges(server, watchers, restart) -> None:
    """Versions going back on the same cluster are caught by the cursor check: relist."""
    populate(server)
    watchers.start("Node", "ResourceSlice")
    wait_equal(server, "Node", "ResourceSlice")
    restore_with_differences(server, watchers=watchers, restart=restart)
    cursor = state_of("Node").resource_version
    assert int(server.resource_version) < int(cursor)
    server.start()
    if restart:
        watchers.start("Node", "ResourceSlice", options=RESUME)
    wait_equal(server, "Node", "ResourceSlice")
    server.apply(objects.node("node-after"))
    wait_equal(server, "Node", "ResourceSlice")
    for kind in ("Node", "ResourceSlice"):
        assert state_of(kind).cursor_valid and not state_of(kind).is_stale()


def test_api_server_down_for_a_while_then_back(server, watchers) -> None:
    """Down for a few seconds (a minute in real life) while things change: converges after."""
    populate(server)
    watchers.start(*KINDS_UNDER_TEST)
    wait_equal(server, *KINDS_UNDER_TEST)
    server.stop()
    server.apply(objects.node("node-while-down"))
    server.delete("nodes", name="node-1")
    server.delete("pods", name="pod-1", namespace="team-a")
    server.apply(objects.resource_slice("node-0-gpu", node_name="node-0", devices=1))
    wait_for(lambda: SyncState.objects.filter(kind="Node").exclude(last_error="").exists())
    time.sleep(2.0)
    server.start()
    wait_equal(server, *KINDS_UNDER_TEST)
    # A kind without changes was equal all along: wait for its reconnect to clear the error.
    healthy = {kind: "ok" for kind in KINDS_UNDER_TEST}
    wait_for(lambda: {s.kind: s.health for s in SyncState.objects.all()} == healthy)


@pytest.mark.once  # a minute of wall time; the shorter outage above runs in both runs
def test_api_server_down_a_minute_during_churn(server, watchers, monkeypatch) -> None:
    """Down for 60 s while objects are created, changed and deleted, with the watchers' backoff
    capped at 5 s: no retry ever waits longer than the cap, and once the server is back the
    database equals it, content included, and every kind is healthy again."""
    populate(server)
    options = replace(FAST, backoff_cap=5.0)
    delays: list[float] = []
    fail = KindWatcher._fail

    def recorded(watcher: KindWatcher, exc: BaseException, delay: float) -> None:
        delays.append(delay)
        fail(watcher, exc, delay)

    monkeypatch.setattr(KindWatcher, "_fail", recorded)
    watchers.start(*KINDS_UNDER_TEST, options=options)
    wait_equal(server, *KINDS_UNDER_TEST)
    server.stop()
    went_down = time.monotonic()
    step = 0
    while time.monotonic() - went_down < 60:
        step += 1
        server.apply(objects.node(f"node-down-{step}"))
        server.apply(objects.resource_claim("team-a", f"claim-down-{step}"))
        server.apply(objects.node("node-0", ready=step % 2 == 0))
        if step > 2:
            server.delete("nodes", name=f"node-down-{step - 2}")
        time.sleep(1.0)
    server.delete("pods", name="pod-1", namespace="team-a")
    server.start()
    wait_equal(server, *KINDS_UNDER_TEST, timeout=60)
    # A minute of failures, and the watchers were never further than one capped wait away.
    assert len(delays) > len(KINDS_UNDER_TEST) and max(delays) <= options.backoff_cap
    healthy = {kind: "ok" for kind in KINDS_UNDER_TEST}
    wait_for(lambda: {s.kind: s.health for s in SyncState.objects.all()} == healthy)


def test_watch_list_is_used_where_served(server, watchers) -> None:
    """The state comes from a watch list (sendInitialEvents), no paginated list."""
    populate(server)
    watchers.start("Node")
    wait_equal(server, "Node")
    node_requests = [r for r in server.requests if r.path == "/api/v1/nodes"]
    assert any(r.query.get("sendInitialEvents") == "true" for r in node_requests)
    assert not [r for r in node_requests if r.query.get("watch") != "true"]


def test_list_and_watch_where_watch_lists_are_not_served(watchers) -> None:
    """A server without the WatchList feature (422) gets a paginated list, then watches."""
    with FakeApiServer(watch_list=False, bookmark_interval=0.3, too_large_wait=0.2) as old:
        populate(old)
        watchers.client_factory = factory_for(old)
        watchers.start("Node", "ResourceClaim")
        wait_equal(old, "Node", "ResourceClaim")
        old.apply(objects.node("node-7"))
        wait_equal(old, "Node", "ResourceClaim")
        lists = [r for r in old.requests if r.path == "/api/v1/nodes" and "watch" not in r.query]
        assert lists, "the state came from a list"
        watchers.stop()


def test_a_failed_watch_list_falls_back_to_a_list(server, watchers) -> None:
    """A watch list answered with a server error is replaced by a list, as client-go does."""
    populate(server)
    server.inject_fault("error", resource="nodes", verb="watch")
    watchers.start("Node")
    wait_equal(server, "Node")
    node_requests = [r for r in server.requests if r.path == "/api/v1/nodes"]
    assert node_requests[0].query.get("sendInitialEvents") == "true"
    assert any("watch" not in r.query and "limit" in r.query for r in node_requests[1:])


def factory_for(server: FakeApiServer) -> Callable[[], KubeClient]:
    folder = Path(tempfile.mkdtemp())
    path = server.write_kubeconfig(folder / "kubeconfig")
    return lambda: load_client(kubeconfig=path)


def test_not_served_is_neutral_and_logged_once(server, client_factory, caplog) -> None:
    """A kind the server lacks is stored as not served, without error, logged once."""
    options = replace(FAST, not_served_poll=0.05)
    stop = threading.Event()
    watcher = KindWatcher(
        KINDS["ResourceClass"],
        client_factory=client_factory,
        sink=DatabaseSink("ResourceClass", watcher="t"),
        stop=stop,
        options=options,
    )
    with caplog.at_level(logging.INFO, logger="inventory.sync.watch.loop"):
        thread = threading.Thread(target=scope.carried(watcher.run), daemon=True)
        thread.start()
        wait_for(lambda: SyncState.objects.filter(kind="ResourceClass", served=False).exists())
        time.sleep(0.5)
        stop.set()
        thread.join(timeout=5)
    state = state_of("ResourceClass")
    assert state.last_error == "" and "not served" in state.not_served_reason
    assert state.health == "not-served" and not state.is_stale()
    said = [r for r in caplog.records if "not served" in r.getMessage()]
    assert len(said) == 1


def test_success_clears_the_last_error(server, watchers) -> None:
    """An error is shown while it lasts and cleared by the next successful batch."""
    populate(server)
    server.inject_fault("error", resource="nodes", verb="watch", times=2)
    watchers.start("Node")
    wait_equal(server, "Node")
    server.apply(objects.node("node-8"))
    wait_equal(server, "Node")
    wait_for(lambda: SyncState.objects.get(kind="Node").last_error == "")
    assert state_of("Node").health == "ok"


def test_staleness_rules() -> None:
    """Stale: cursor not valid, never verified, or verified longer ago than the bound."""
    now = timezone.now()
    fresh = SyncState(kind="Node", resource_version="5", cursor_valid=True, verified_at=now)
    assert not fresh.is_stale(now=now)
    assert fresh.is_stale(now=now + SyncState.STALE_AFTER + timedelta(seconds=1))
    assert fresh.is_stale(now=now + timedelta(minutes=2), max_age=timedelta(minutes=1))
    assert SyncState(kind="Node", resource_version="5", verified_at=now).is_stale(now=now)
    assert SyncState(kind="Node", cursor_valid=True, verified_at=now).is_stale(now=now)
    assert not SyncState(kind="Node", served=False).is_stale(now=now)


def test_stale_kinds_lists_what_may_differ_from_the_cluster() -> None:
    """stale_kinds names served kinds with an invalid or unchecked cursor, not unserved ones."""
    now = timezone.now()
    old = now - SyncState.STALE_AFTER - timedelta(minutes=1)
    SyncState.objects.create(kind="Node", resource_version="5", cursor_valid=True, verified_at=now)
    SyncState.objects.create(kind="Pod", resource_version="5", cursor_valid=True, verified_at=old)
    SyncState.objects.create(kind="ResourceSlice", resource_version="5", verified_at=now)
    SyncState.objects.create(kind="ResourceClass", served=False)
    assert sorted(watch_state.stale_kinds()) == ["Pod", "ResourceSlice"]
