"""Events (events.k8s.io/v1) sync through the real watch: only those about claims and pods with
claims are kept, and the table stays within its bounds by count."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from claims.models import Event, Pod
from dralib.kube.fakeapi import FakeApiServer
from inventory.sync.watch import write_guard
from tests.inventory.sync.conftest import wait_converged

pytestmark = pytest.mark.django_db(transaction=True)

NAMESPACE = "team"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event(
    name: str, *, kind: str, about: str, reason: str, at: datetime, **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "eventTime": _stamp(at),
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-control-plane",
        "action": "Scheduling",
        "reason": reason,
        "type": "Warning",
        "note": "0/4 nodes are available: 4 cannot allocate all claims.",
        "regarding": {"kind": kind, "namespace": NAMESPACE, "name": about, "apiVersion": "v1"},
        **extra,
    }


def pod(name: str, *, claims: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def wait_for(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the sync did not get there"
        time.sleep(0.05)


def stored() -> set[tuple[str, str, str]]:
    # Under the sync's write lock: SQLite refuses a read while a watcher's batch writes.
    with write_guard():
        return set(Event.objects.values_list("name", "regarding_kind", "regarding_name"))


def test_events_about_claims_and_pods_with_claims_are_synced(
    server: FakeApiServer, watchers
) -> None:
    """The scheduler's event about a pod with claims and a claim's event are stored with their
    columns; events about a pod without claims and about a node are not."""
    now = datetime.now(UTC)
    server.apply(pod("trainer", claims=True))
    server.apply(pod("web", claims=False))
    watchers.start("Pod")
    wait_converged(server, "Pod")
    assert Pod.objects.get(name="web").uses_claims is False
    server.apply(
        event(
            "trainer.1",
            kind="Pod",
            about="trainer",
            reason="FailedScheduling",
            at=now - timedelta(minutes=5),
            series={"count": 4, "lastObservedTime": _stamp(now)},
        )
    )
    server.apply(event("web.1", kind="Pod", about="web", reason="FailedScheduling", at=now))
    server.apply(event("gpu.1", kind="ResourceClaim", about="trainer-gpu", reason="X", at=now))
    server.apply(event("node.1", kind="Node", about="node-a", reason="NodeReady", at=now))
    server.apply(event("gpu.2", kind="ResourceClaim", about="trainer-gpu", reason="Y", at=now))
    watchers.start("Event")
    # The last event applied is stored: the watch has passed every one before it.
    wait_for(lambda: ("gpu.2", "ResourceClaim", "trainer-gpu") in stored())
    watchers.stop()
    assert stored() == {
        ("trainer.1", "Pod", "trainer"),
        ("gpu.1", "ResourceClaim", "trainer-gpu"),
        ("gpu.2", "ResourceClaim", "trainer-gpu"),
    }
    row = Event.objects.get(name="trainer.1")
    assert (row.event_type, row.reason, row.reporting_controller, row.action) == (
        "Warning",
        "FailedScheduling",
        "default-scheduler",
        "Scheduling",
    )
    assert row.count == 4
    assert row.first_seen < row.last_seen
    assert row.raw["regarding"]["name"] == "trainer"
    server.delete("events", name="gpu.1", namespace=NAMESPACE)
    watchers.start("Event")
    wait_for(lambda: ("gpu.1", "ResourceClaim", "trainer-gpu") not in stored())


def test_events_are_bounded_per_object_and_by_age(
    server: FakeApiServer, watchers, settings
) -> None:
    """However many events a pod gets, the newest EVENTS_PER_OBJECT are kept; events older than
    the TTL are not kept at all."""
    settings.EVENTS_PER_OBJECT = 3
    settings.EVENTS_TTL_SECONDS = 3600
    now = datetime.now(UTC)
    server.apply(pod("trainer", claims=True))
    watchers.start("Pod", "Event")
    wait_converged(server, "Pod")
    for index in range(40):
        at = now - timedelta(seconds=400 - index * 10)
        server.apply(event(f"trainer.{index:02d}", kind="Pod", about="trainer", reason="R", at=at))
    server.apply(
        event("trainer.old", kind="Pod", about="trainer", reason="R", at=now - timedelta(hours=2))
    )
    server.apply(event("claim.1", kind="ResourceClaim", about="c", reason="R", at=now))
    # Applied last: once it is stored, every event before it went through the sync.
    wait_for(lambda: ("claim.1", "ResourceClaim", "c") in stored())
    watchers.stop()
    names = set(Event.objects.filter(regarding_name="trainer").values_list("name", flat=True))
    assert names == {"trainer.37", "trainer.38", "trainer.39"}
    assert Event.objects.count() == 4


def test_bounds_run_for_objects_that_gained_an_event(settings) -> None:
    """An event updated in place (its count bumped) adds no row, so its object's bound is not
    read again; an event now about another object counts against that object's bound."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inventory.sync import apply_events

    settings.EVENTS_PER_OBJECT = 2
    now = datetime.now(UTC)
    trainer = pod("trainer", claims=True)
    trainer["metadata"].update(uid="uid-trainer", resourceVersion="1")
    apply_events("Pod", [("ADDED", trainer)], publish=False)
    assert Pod.objects.get(name="trainer").uses_claims
    about_pod = [
        event(f"p.{i}", kind="Pod", about="trainer", reason="R", at=now - timedelta(seconds=i))
        for i in range(2)
    ]
    about_claim = [
        event(
            f"c.{i}", kind="ResourceClaim", about="gpu", reason="R", at=now - timedelta(seconds=i)
        )
        for i in range(2)
    ]
    for index, obj in enumerate(about_pod + about_claim):
        obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", resourceVersion=str(index))
    apply_events("Event", [("ADDED", obj) for obj in about_pod + about_claim], publish=False)
    assert Event.objects.count() == 4

    bumped = dict(about_pod[0], series={"count": 7, "lastObservedTime": _stamp(now)})
    bumped["metadata"] = dict(about_pod[0]["metadata"], resourceVersion="10")
    with CaptureQueriesContext(connection) as queries:
        apply_events("Event", [("MODIFIED", bumped)], publish=False)
    assert Event.objects.get(name="p.0").count == 7
    bound = '"claims_event"."namespace" ASC, "claims_event"."regarding_kind" ASC'
    assert not [q for q in queries if bound in q["sql"]]

    # p.1, seen again now, is about the claim: the newest two of the claim's three events stay.
    moved = dict(
        about_pod[1],
        regarding=dict(about_claim[0]["regarding"]),
        eventTime=_stamp(now + timedelta(seconds=1)),
    )
    moved["metadata"] = dict(about_pod[1]["metadata"], resourceVersion="11")
    apply_events("Event", [("MODIFIED", moved)], publish=False)
    kept = set(Event.objects.filter(regarding_name="gpu").values_list("name", flat=True))
    assert kept == {"p.1", "c.0"}
