"""The database converges to the fake API server's state through faults, restarts and replays.

Each test drives real watcher threads against the fake server over HTTP, then compares database
and server object for object (uid and resourceVersion per kind).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import yaml

from dashboard import scope
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import KINDS
from inventory.models import SyncState
from inventory.sync import BatchResult, handler_for
from inventory.sync.watch import DatabaseSink, KindWatcher, write_guard
from inventory.sync.watch import state as watch_state
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST, wait_converged, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KINDS_UNDER_TEST = ("Node", "ResourceSlice", "ResourceClaim", "Pod")


def populate(server: FakeApiServer, *, start: int = 0, count: int = 3) -> None:
    for i in range(start, start + count):
        server.apply(objects.node(f"node-{i}"))
        server.apply(objects.resource_slice(f"node-{i}-gpu", node_name=f"node-{i}"))
        server.apply(objects.resource_claim("team-a", f"claim-{i}"))
        server.apply(objects.pod("team-a", f"pod-{i}", claim=f"claim-{i}"))
        server.apply(objects.pod("team-a", f"plain-{i}", claim=None))


def churn(server: FakeApiServer, *, step: int) -> None:
    """Create, modify and delete across kinds."""
    populate(server, start=100 + step * 10, count=2)
    server.apply(objects.node("node-0", ready=step % 2 == 0))
    server.apply(objects.resource_slice("node-1-gpu", node_name="node-1", devices=step % 3 + 1))
    for plural, name, namespace in (
        ("nodes", f"node-{100 + step * 10}", None),
        ("resourceclaims", f"claim-{100 + step * 10}", "team-a"),
        ("pods", f"pod-{100 + step * 10}", "team-a"),
    ):
        server.delete(plural, name=name, namespace=namespace)


def list_requests(server: FakeApiServer, plural: str) -> int:
    """Full syncs of `plural`: first pages of lists at the latest version, and watch lists."""
    return sum(
        1
        for r in server.requests
        if r.path.endswith("/" + plural)
        and (
            r.query.get("sendInitialEvents") == "true"
            or (
                r.query.get("watch") != "true"
                and not set(r.query) & {"continue", "resourceVersion"}
            )
        )
    )


# Resume the stored cursor when the server proves it, instead of syncing on start.
RESUME = replace(FAST, list_on_start=False)


def state_of(kind: str) -> SyncState:
    with write_guard():
        return SyncState.objects.get(kind=kind)


def test_initial_sync_and_changes_across_kinds(server, watchers) -> None:
    """Listed objects, then creates, updates and deletes reach the database for every kind."""
    populate(server)
    watchers.start(*KINDS_UNDER_TEST)
    wait_converged(server, *KINDS_UNDER_TEST)
    for step in range(3):
        churn(server, step=step)
    wait_converged(server, *KINDS_UNDER_TEST)
    with write_guard():
        plain = handler_for("Pod").model.objects.filter(name__startswith="plain-")
        assert plain.exists() and not plain.exclude(raw={}).exists(), (
            "pods without claims are stored as their projection, without their object"
        )
    state = state_of("ResourceSlice")
    assert state.served_version == "v1"
    assert state.object_count == len(server.objects("resourceslices"))
    assert state.resource_version and state.heartbeat_at is not None


@pytest.mark.parametrize("fault", ["close", "cut"])
def test_stream_ended_or_cut_mid_chunk(server, watchers, fault) -> None:
    """A watch closed or cut mid-event resumes from the stored version and loses nothing."""
    populate(server)
    server.inject_fault(fault, verb="watch", after_events=2, times=3)
    watchers.start("Node", "ResourceSlice")
    # Keep changing things until every faulted watch has met its fault.
    for step in range(8):
        if not server.pending_faults:
            break
        churn(server, step=step)
        time.sleep(0.3)
    assert not server.pending_faults
    wait_converged(server, "Node", "ResourceSlice")


def test_silent_hang_is_detected_and_reconnected(server, watchers, recorded_errors) -> None:
    """A watch that sends nothing is dropped after the read timeout and resumed."""
    populate(server)
    server.inject_fault("hang", resource="nodes", verb="watch", hang_seconds=30)
    watchers.start("Node")
    wait_for(lambda: not server.pending_faults)
    churn(server, step=0)
    wait_converged(server, "Node", timeout=8)
    messages = [message for kind, message in recorded_errors if kind == "Node"]
    assert any("broke" in message or "timed out" in message for message in messages)
    assert state_of("Node").last_error == "", "a success clears the error"


def test_throttled_list_honours_retry_after(server, watchers, recorded_errors, monkeypatch) -> None:
    """A 429 with Retry-After: 1 delays the retry by at least a second, then sync completes."""
    populate(server)
    server.watch_list = False
    server.inject_fault("throttle", resource="nodes", verb="list", retry_after=1)
    delays: list[tuple[str, float]] = []
    fail = KindWatcher._fail

    def recorded(watcher: KindWatcher, exc: BaseException, delay: float) -> None:
        delays.append((str(exc), delay))
        fail(watcher, exc, delay)

    monkeypatch.setattr(KindWatcher, "_fail", recorded)
    watchers.start("Node")
    wait_converged(server, "Node")
    throttled = [delay for message, delay in delays if "429" in message]
    assert len(throttled) == 1 and throttled[0] >= 1.0
    assert any("429" in message for kind, message in recorded_errors if kind == "Node")
    assert state_of("Node").last_error == ""


def test_server_errors_on_list_and_watch(server, watchers, recorded_errors) -> None:
    """500s on list and watch are retried with backoff until the sync converges."""
    populate(server)
    server.inject_fault("error", resource="resourceslices", verb="list", times=2)
    server.inject_fault("error", resource="resourceslices", verb="watch", times=2)
    watchers.start("ResourceSlice")
    wait_converged(server, "ResourceSlice")
    churn(server, step=1)
    wait_converged(server, "ResourceSlice")
    assert any("500" in message for kind, message in recorded_errors if kind == "ResourceSlice")
    assert state_of("ResourceSlice").last_error == ""


def test_api_server_down_at_start_then_up(server, watchers) -> None:
    """With the API server down the watcher records the error and syncs once it is up."""
    populate(server)
    server.stop()
    watchers.start("Node", "ResourceClaim")
    wait_for(lambda: SyncState.objects.filter(kind="Node").exclude(last_error="").exists())
    server.start()
    wait_converged(server, "Node", "ResourceClaim")


def test_worker_killed_between_batches_resumes_from_stored_version(
    server, watchers, client_factory
) -> None:
    """Without list_on_start, a restarted watcher resumes the proven stored version."""
    populate(server)
    watchers.start("Node", "ResourceClaim")
    wait_converged(server, "Node", "ResourceClaim")
    watchers.stop()
    churn(server, step=0)
    lists_before = list_requests(server, "nodes")
    watchers.start("Node", "ResourceClaim", options=RESUME)
    wait_converged(server, "Node", "ResourceClaim")
    assert list_requests(server, "nodes") == lists_before


def test_compaction_while_stopped_relists_and_deletes_the_missing(server, watchers) -> None:
    """After compaction the stored version is gone: 410, relist, and stale rows are deleted."""
    populate(server, count=4)
    watchers.start("Node", "ResourceSlice")
    wait_converged(server, "Node", "ResourceSlice")
    watchers.stop()
    churn(server, step=0)
    server.delete("nodes", name="node-3")
    server.delete("resourceslices", name="node-3-gpu")
    server.compact()
    lists_before = list_requests(server, "nodes")
    watchers.start("Node", "ResourceSlice")
    wait_converged(server, "Node", "ResourceSlice")
    assert list_requests(server, "nodes") > lists_before


def test_history_overflow_during_a_stream_means_gone_and_relist(watchers, client_factory) -> None:
    """Changes beyond the server's history while the watch is stalled end in 410 and a relist."""
    # A separate server with a tiny history; the watcher stalls on a short hang meanwhile.
    with FakeApiServer(history_limit=5, bookmark_interval=0.3) as small:
        populate(small)
        watchers.client_factory = _factory_for(small)
        watchers.start("Node", options=replace(FAST, timeout_seconds=1))
        wait_converged(small, "Node")
        small.inject_fault("hang", resource="nodes", verb="watch", hang_seconds=1.0)
        wait_for(lambda: not small.pending_faults)
        for step in range(3):
            churn(small, step=step)
        wait_converged(small, "Node")
        assert list_requests(small, "nodes") >= 2


def _factory_for(server: FakeApiServer):
    config = server.kubeconfig()
    return lambda: load_client_from(config)


def load_client_from(config: dict):
    import tempfile

    from dralib.kube.client import load_client

    with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as handle:
        yaml.safe_dump(config, handle)
    return load_client(kubeconfig=handle.name)


def test_replay_through_intermediate_states_converges(server, watchers) -> None:
    """A replay that re-applies superseded states and deleted objects still ends equal."""
    populate(server)
    first_version = server.resource_version
    churn(server, step=0)
    churn(server, step=1)
    watchers.start("Node", "ResourceSlice")
    wait_converged(server, "Node", "ResourceSlice")
    watchers.stop()
    with write_guard():
        SyncState.objects.filter(kind__in=["Node", "ResourceSlice"]).update(
            resource_version=first_version
        )
    watchers.start("Node", "ResourceSlice", options=RESUME)
    # The replay runs through old states; wait for the watcher to reach the present again.
    wait_for(lambda: state_of("Node").resource_version == server.resource_version)
    wait_converged(server, "Node", "ResourceSlice")


def change_each_once(server: FakeApiServer) -> None:
    """Add, modify and delete Nodes and ResourceSlices, touching each object at most once.

    Replaying these events from before them re-sends only states the database already holds
    (and deletions of rows already gone), so a replay must write nothing.
    """
    for i in (50, 51):
        server.apply(objects.node(f"node-{i}"))
        server.apply(objects.resource_slice(f"node-{i}-gpu", node_name=f"node-{i}"))
    server.apply(objects.node("node-0", ready=False))
    server.apply(objects.resource_slice("node-1-gpu", node_name="node-1", devices=3))
    server.delete("resourceslices", name="node-2-gpu")
    server.delete("nodes", name="node-2")


def synced_at(kind: str) -> dict[str, object]:
    with write_guard():
        return dict(handler_for(kind).model.objects.values_list("uid", "synced_at"))


def test_replayed_events_change_nothing(server, watchers, monkeypatch) -> None:
    """Rewinding the stored version replays old events: they write nothing, the DB stays equal."""
    kinds = ("Node", "ResourceSlice")
    populate(server)
    first_version = server.resource_version
    change_each_once(server)
    watchers.start(*kinds)
    wait_converged(server, *kinds)
    watchers.stop()
    written = {kind: synced_at(kind) for kind in kinds}
    with write_guard():
        SyncState.objects.filter(kind__in=kinds).update(resource_version=first_version)

    replayed = {kind: BatchResult() for kind in kinds}
    events = dict.fromkeys(kinds, 0)
    record_batch = watch_state.record_batch

    def spy(kind: str, **kwargs) -> None:
        replayed[kind].merge(kwargs["result"])
        events[kind] += kwargs["events"]
        record_batch(kind, **kwargs)

    monkeypatch.setattr(watch_state, "record_batch", spy)
    watchers.start(*kinds, options=RESUME)
    # The replay runs through old events; wait until each watcher's cursor is the present.
    for kind in kinds:
        wait_for(lambda kind=kind: state_of(kind).resource_version == server.resource_version)
    watchers.stop()
    wait_converged(server, *kinds, timeout=0)
    for kind in kinds:
        # change_each_once: per kind two ADDED, one MODIFIED, one DELETED event.
        assert events[kind] == 4, (kind, events)
        result = replayed[kind]
        assert (result.upserted, result.unchanged, result.deleted) == (0, 3, 0), (kind, result)
    assert {kind: synced_at(kind) for kind in kinds} == written


def test_list_continue_expired_is_gone(server, client_factory) -> None:
    """A continue token older than the history answers HTTP 410, which the client maps to Gone."""
    from dralib.kube.client import ApiStatusError

    populate(server)
    client = client_factory()
    path = KINDS["Node"].path("v1")
    page = client.get(path, {"limit": 1})
    token = page["metadata"]["continue"]
    server.apply(objects.node("late"))
    server.compact()
    with pytest.raises(ApiStatusError) as caught:
        client.get(path, {"limit": 1, "continue": token})
    assert caught.value.gone


def test_sigterm_flag_stops_after_the_current_batch(server, client_factory) -> None:
    """A set stop event ends run() promptly and frees the watcher name."""
    import threading

    populate(server)
    stop = threading.Event()
    watcher = KindWatcher(
        KINDS["Node"],
        client_factory=client_factory,
        sink=DatabaseSink("Node", watcher="t-1"),
        stop=stop,
        options=FAST,
    )
    thread = threading.Thread(target=scope.carried(watcher.run), daemon=True)
    thread.start()
    wait_converged(server, "Node")
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert state_of("Node").watcher == ""


def test_a_failed_watch_list_write_closes_its_stream(server, watchers, monkeypatch) -> None:
    """The database refusing the state a watch list sent (here twice) closes that stream and its
    reader before the retry: no reader thread is left behind, and the retry converges."""
    import threading

    from django.db import OperationalError

    from inventory.sync.watch import store as watch_store

    populate(server)
    # Readers other tests left running are not this test's concern.
    before = set(threading.enumerate())
    failures = [0]
    original = watch_store.replace_all

    def refusing(kind, pairs, **options):
        if kind == "Node" and failures[0] < 2:
            failures[0] += 1
            raise OperationalError("database is down")
        return original(kind, pairs, **options)

    monkeypatch.setattr(watch_store, "replace_all", refusing)
    watchers.start("Node")
    wait_converged(server, "Node")
    assert failures[0] == 2
    assert any(r.query.get("sendInitialEvents") == "true" for r in server.requests)
    readers = [t for t in threading.enumerate() if t.name == "watch-read:Node" and t not in before]
    assert len(readers) <= 1  # the live stream's, unless it is reconnecting just now
