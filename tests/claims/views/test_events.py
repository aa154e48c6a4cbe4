"""The claim and pod pages show the events about them, newest first, and follow them live."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import Client
from django.urls import reverse

from claims.models import Event
from inventory.sync import upsert_events
from tests.console.test_live import connect, session_headers

NAMESPACE = "team"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event(name: str, *, kind: str, about: str, reason: str, note: str, ago: int) -> dict[str, Any]:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "eventTime": _stamp(at),
        "reportingController": "default-scheduler",
        "action": "Scheduling",
        "reason": reason,
        "type": "Warning" if reason == "FailedScheduling" else "Normal",
        "note": note,
        "regarding": {"kind": kind, "namespace": NAMESPACE, "name": about},
    }


def load_claim_and_pod() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "trainer-gpu", "namespace": NAMESPACE, "uid": "uid-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": NAMESPACE, "uid": "uid-pod"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "trainer-gpu"}],
        },
        "status": {"phase": "Pending"},
    }
    upsert_events("ResourceClaim", [(claim, None)], publish=False)
    upsert_events("Pod", [(pod, None)], publish=False)


@pytest.fixture
def with_events(db) -> None:
    load_claim_and_pod()
    events = [
        event(
            "trainer.old",
            kind="Pod",
            about="trainer",
            reason="FailedScheduling",
            note="0/4 nodes are available: 4 cannot allocate all claims.",
            ago=600,
        ),
        event(
            "trainer.new",
            kind="Pod",
            about="trainer",
            reason="Scheduled",
            note="Successfully assigned team/trainer to node-a",
            ago=5,
        ),
        event(
            "claim.mid",
            kind="ResourceClaim",
            about="trainer-gpu",
            reason="Waiting",
            note="waiting for the pod",
            ago=60,
        ),
        event("other.1", kind="Pod", about="someone-else", reason="X", note="not ours", ago=1),
    ]
    upsert_events("Event", [(e, None) for e in events], publish=False)


def reasons_in_order(html: str) -> list[str]:
    return re.findall(r'<tr class="event[^"]*" data-reason="([^"]*)"', html)


def test_claim_page_lists_its_own_and_its_pods_events_newest_first(
    with_events, viewer_client: Client
) -> None:
    """The claim page shows the claim's and its waiting pod's events, newest first, with the
    scheduler as their source; another pod's events are not there."""
    html = viewer_client.get(reverse("claim-detail", args=[NAMESPACE, "trainer-gpu"])).content
    text = html.decode()
    assert reasons_in_order(text) == ["Scheduled", "Waiting", "FailedScheduling"]
    assert "0/4 nodes are available: 4 cannot allocate all claims." in text
    assert "default-scheduler" in text
    assert "not ours" not in text


def test_pod_page_lists_the_pods_events_in_a_live_fragment(
    with_events, viewer_client: Client
) -> None:
    """The pod page shows only the pod's events; its events fragment renders on its own."""
    url = reverse("pod-detail", args=[NAMESPACE, "trainer"])
    text = viewer_client.get(url).content.decode()
    assert reasons_in_order(text) == ["Scheduled", "FailedScheduling"]
    assert 'id="pod-events"' in text and 'hx-trigger="live"' in text
    fragment = viewer_client.get(url, {"fragment": "events"}).content.decode()
    assert reasons_in_order(fragment) == ["Scheduled", "FailedScheduling"]


def test_events_past_the_ttl_are_not_shown(with_events, viewer_client: Client, settings) -> None:
    """An event last seen longer ago than EVENTS_TTL_SECONDS is not on the page."""
    settings.EVENTS_TTL_SECONDS = 120
    url = reverse("pod-detail", args=[NAMESPACE, "trainer"])
    assert reasons_in_order(viewer_client.get(url).content.decode()) == ["Scheduled"]


@pytest.mark.django_db(transaction=True)
async def test_a_new_event_reaches_the_namespace_topic(viewer_user) -> None:
    """A new event about a pod is announced on its namespace's topic, which its pages follow."""
    await sync_to_async(load_claim_and_pod)()
    headers = await sync_to_async(session_headers)(viewer_user)
    ours, connected = await connect(f"/ws/live/?topics=namespace:{NAMESPACE}", headers)
    assert connected
    failed = event(
        "trainer.1", kind="Pod", about="trainer", reason="FailedScheduling", note="n", ago=0
    )
    await sync_to_async(upsert_events)("Event", [(failed, None)])
    message = await ours.receive_json_from(timeout=2)
    assert message["topic"] == f"namespace:{NAMESPACE}" and message["kind"] == "events"
    assert await sync_to_async(Event.objects.count)() == 1
    await ours.disconnect()
    await sync_to_async(connections.close_all)()
