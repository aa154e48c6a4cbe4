"""The live websocket, driven through the real ASGI app with WebsocketCommunicator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from claims.devices.states import annotate_device_state
from console.asgi import application
from console.consumers import TopicError, parse_topics
from dashboard.live import send_now
from inventory.models import Device, Pool
from inventory.sync import upsert_events
from tests.console.demo import allocate, load_demo, pending_claim

# localhost is in the default ALLOWED_HOSTS, which the origin validator reads when the ASGI
# app is built (before pytest-django adds testserver to them).
ORIGIN = (b"origin", b"http://localhost")
# A browser always sends Host; the origin check compares scheme, host and port with it.
HOST = (b"host", b"localhost")


@pytest.fixture(autouse=True)
async def close_worker_thread_connections() -> AsyncIterator[None]:
    """Close the database connection these async tests open outside the main thread.

    With no async_to_sync around them, `sync_to_async` calls (the test's own, and the consumer's
    `database_sync_to_async`) all run in asgiref's one shared worker thread, whose connection
    Django keeps for reuse (CONN_MAX_AGE) and pytest-django never closes: PostgreSQL then
    refused to drop the test database at the end of the run ("being accessed by other users").
    """
    yield
    await sync_to_async(connections.close_all)()


def session_headers(user: User) -> list[tuple[bytes, bytes]]:
    """Cookie and same-origin headers of a browser signed in as `user`."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return [HOST, ORIGIN, (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())]


async def connect(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[Any, bool]:
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    return communicator, connected


def free_device_and_claim() -> tuple[dict[str, Any], Device, Pool]:
    objects = load_demo(nodes=4, seed=2)
    device = (
        annotate_device_state(Device.objects.filter(current=True))
        .filter(state="free")
        .exclude(node_name="")
        .first()
    )
    assert device is not None
    return pending_claim(objects), device, device.pool


def test_topics_are_parsed_and_checked() -> None:
    """Known topics parse into groups; unknown, malformed or missing topics are refused."""
    subs = parse_topics(b"topics=overview,pool:gpu.example.com/a/b,node:n1,namespace:team-a,claims")
    assert [s.kind for s in subs] == ["overview", "pool", "node", "namespace", "generic"]
    for bad in (b"", b"topics=nonsense", b"topics=pool:x", b"topics=pool:/x", b"topics=node:"):
        with pytest.raises(TopicError):
            parse_topics(bad)


@pytest.mark.django_db(transaction=True)
async def test_anonymous_connections_are_refused() -> None:
    """A socket without a signed-in session is closed before the handshake completes."""
    communicator, connected = await connect("/ws/live/?topics=overview", [HOST, ORIGIN])
    assert not connected
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_cross_origin_connections_are_refused(viewer_user) -> None:
    """A signed-in session from another origin is refused by the origin validator."""
    headers = [h for h in await sync_to_async(session_headers)(viewer_user) if h[0] != b"origin"]
    communicator, connected = await connect(
        "/ws/live/?topics=overview", [*headers, (b"origin", b"http://evil.example")]
    )
    assert not connected
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_unknown_topics_are_refused(viewer_user) -> None:
    """A signed-in page asking for a topic the live layer does not know is refused."""
    headers = await sync_to_async(session_headers)(viewer_user)
    communicator, connected = await connect("/ws/live/?topics=secrets", headers)
    assert not connected
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_signed_in_pool_page_hears_an_allocation_after_commit(viewer_user) -> None:
    """Allocating a claim to a pool's device through the sync path reaches that pool's topic."""
    claim, device, pool = await sync_to_async(free_device_and_claim)()
    other = await sync_to_async(
        Pool.objects.exclude(pk=pool.pk).exclude(driver=pool.driver).first
    )()
    headers = await sync_to_async(session_headers)(viewer_user)
    mine, ok_mine = await connect(f"/ws/live/?topics=pool:{pool},overview", headers)
    theirs, ok_theirs = await connect(f"/ws/live/?topics=pool:{other}", headers)
    assert ok_mine and ok_theirs
    allocated = allocate(claim, driver=device.driver, pool=device.pool_name, device=device.name)
    await sync_to_async(upsert_events)("ResourceClaim", [(allocated, None)])
    expected = {
        (f"pool:{pool}", "devices"),
        (f"pool:{pool}", "claims"),
        ("overview", "claims"),
    }
    topics: set[tuple[str, str]] = set()
    while not expected <= topics:
        message = await mine.receive_json_from(timeout=3)
        topics.add((message["topic"], message["kind"]))
    assert await theirs.receive_nothing(timeout=0.3)
    await mine.disconnect()
    await theirs.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_nothing_is_sent_before_the_batch_commits(viewer_user) -> None:
    """Events of a rolled-back batch never reach the socket."""
    claim, device, pool = await sync_to_async(free_device_and_claim)()
    headers = await sync_to_async(session_headers)(viewer_user)
    communicator, connected = await connect(f"/ws/live/?topics=pool:{pool}", headers)
    assert connected

    def rolled_back() -> None:
        from django.db import transaction

        allocated = allocate(claim, driver=device.driver, pool=device.pool_name, device=device.name)
        try:
            with transaction.atomic():
                upsert_events("ResourceClaim", [(allocated, None)])
                raise RuntimeError("abort the outer transaction")
        except RuntimeError:
            pass

    await sync_to_async(rolled_back)()
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()
    await asyncio.sleep(0)


@pytest.mark.django_db(transaction=True)
async def test_namespace_and_node_topics_hear_only_their_own_claims(viewer_user) -> None:
    """A claim allocated on a node in one namespace reaches that namespace's and node's topics,
    not another namespace's."""
    claim, device, _pool = await sync_to_async(free_device_and_claim)()
    namespace = claim["metadata"]["namespace"]
    headers = await sync_to_async(session_headers)(viewer_user)
    ours, ok_ours = await connect(f"/ws/live/?topics=namespace:{namespace}", headers)
    others, ok_others = await connect("/ws/live/?topics=namespace:no-such-namespace", headers)
    node, ok_node = await connect(f"/ws/live/?topics=node:{device.node_name}", headers)
    assert ok_ours and ok_others and ok_node and device.node_name
    allocated = allocate(claim, driver=device.driver, pool=device.pool_name, device=device.name)
    await sync_to_async(upsert_events)("ResourceClaim", [(allocated, None)])
    message = await ours.receive_json_from(timeout=2)
    assert message["topic"] == f"namespace:{namespace}" and message["kind"] == "claims"
    node_message = await node.receive_json_from(timeout=2)
    assert node_message["topic"] == f"node:{device.node_name}"
    assert await others.receive_nothing(timeout=0.3)
    for communicator in (ours, others, node):
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_unscoped_pages_take_no_database_trip_per_event(viewer_user, monkeypatch) -> None:
    """Three pages following `claims` or the overview hear one event without asking whether it
    concerns them (no trip to the database thread each); a node page still asks, once."""
    from console import consumers

    asked: list[str] = []
    original = consumers.concerns

    def counting(sub: Any, event: Any) -> bool:
        asked.append(sub.topic)
        return original(sub, event)

    monkeypatch.setattr(consumers, "concerns", counting)
    headers = await sync_to_async(session_headers)(viewer_user)
    pages = []
    for topics in ("claims", "overview", "claims,overview", "node:no-such-node"):
        page, connected = await connect(f"/ws/live/?topics={topics}", headers)
        assert connected
        pages.append(page)
    await sync_to_async(send_now)({"claims": ["12345"]})
    for page, heard in zip(pages, (["claims"], ["overview"], ["claims", "overview"]), strict=False):
        topics = [(await page.receive_json_from(timeout=3))["topic"] for _ in heard]
        assert sorted(topics) == heard
    assert await pages[-1].receive_nothing(timeout=0.3)
    assert asked == ["node:no-such-node"]
    for page in pages:
        await page.disconnect()
