"""The fake API server serves events.k8s.io/v1 Events as kube-apiserver does, read by the official
kubernetes client's typed EventsV1Api: discovery, lists and watches with the `regarding.*` field
selectors kubectl uses."""

from __future__ import annotations

from typing import Any

from kubernetes import client, watch

from dralib.kube.fakeapi import FakeApiServer


def event(name: str, namespace: str, *, kind: str, about: str, reason: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-control-plane",
        "action": "Scheduling",
        "reason": reason,
        "type": "Warning",
        "note": "0/3 nodes are available: 3 cannot allocate all claims.",
        "regarding": {"kind": kind, "namespace": namespace, "name": about, "apiVersion": "v1"},
    }


def test_events_discovered_beside_the_other_groups(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """/apis lists events.k8s.io at v1, also without DRA; its resource list names events."""
    server.set_served_versions([])
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["events.k8s.io"].preferred_version.version == "v1"
    resources = client.EventsV1Api(api).get_api_resources().resources
    assert [(r.name, r.namespaced, r.kind) for r in resources] == [("events", True, "Event")]


def test_events_listed_and_watched_by_regarding_object(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    """A fieldSelector on regarding.kind and regarding.name picks one object's events, in a list
    and in a watch from the list's version."""
    server.apply(event("a.1", "team", kind="Pod", about="trainer", reason="FailedScheduling"))
    server.apply(event("b.1", "team", kind="Pod", about="other", reason="FailedScheduling"))
    server.apply(event("c.1", "team", kind="ResourceClaim", about="trainer-gpu", reason="Pending"))
    events = client.EventsV1Api(api)
    everywhere = events.list_event_for_all_namespaces()
    assert everywhere.kind == "EventList"
    assert sorted(e.metadata.name for e in everywhere.items) == ["a.1", "b.1", "c.1"]
    selector = "regarding.kind=Pod,regarding.name=trainer"
    mine = events.list_namespaced_event("team", field_selector=selector)
    assert [(e.metadata.name, e.reason, e.reporting_controller) for e in mine.items] == [
        ("a.1", "FailedScheduling", "default-scheduler")
    ]
    assert mine.items[0].regarding.name == "trainer"
    server.apply(event("a.2", "team", kind="Pod", about="trainer", reason="Scheduled"))
    server.apply(event("b.2", "team", kind="Pod", about="other", reason="Scheduled"))
    stream = watch.Watch().stream(
        events.list_namespaced_event,
        "team",
        field_selector=selector,
        resource_version=mine.metadata.resource_version,
        timeout_seconds=2,
    )
    seen = [(e["type"], e["object"].metadata.name) for e in stream]
    assert seen == [("ADDED", "a.2")]
