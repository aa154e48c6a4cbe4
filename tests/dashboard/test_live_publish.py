"""Live events reach the Redis channel layer over kept connections, not one per commit."""

from __future__ import annotations

import asyncio

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from dashboard.live import group_name, send_now

pytestmark = pytest.mark.redis


def test_sends_reuse_their_redis_connections() -> None:
    """Five commits' events arrive, and Redis sees at most two new connections for them (it saw
    one per send while each send ran in an event loop of its own)."""
    if not settings.REDIS_URL:
        pytest.skip("the in-memory layer has no connections; the Redis run checks")
    client = redis.Redis.from_url(settings.REDIS_URL)

    def connections() -> int:
        return int(client.info("stats")["total_connections_received"])

    async def run() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group_name("claims"), channel)
        await sync_to_async(send_now)({"claims": ["0"]})  # the layer's pool connects here
        before = await sync_to_async(connections)()
        for index in range(1, 6):
            await sync_to_async(send_now)({"claims": [str(index)]})
        made = await sync_to_async(connections)() - before
        received = [await layer.receive(channel) for _ in range(6)]
        await layer.group_discard(group_name("claims"), channel)
        assert made <= 2, f"{made} new Redis connections for 5 sends"
        return received

    received = asyncio.run(run())
    assert [event["ids"] for event in received] == [[str(i)] for i in range(6)]
    assert {event["type"] for event in received} == {"live.changed"}


def test_an_idle_socket_outlasts_the_layers_blocking_pop() -> None:
    """A page's live socket that hears nothing for longer than the layer's blocking pop keeps
    waiting: redis-py 8's default 5 s read timeout raced the pop's empty reply and raised
    "Timeout reading from" (channels_redis #422), which closed the socket."""
    if not settings.REDIS_URL:
        pytest.skip("the in-memory layer does not read Redis; the Redis run checks")

    async def run() -> None:
        layer = get_channel_layer()
        pool = layer.create_pool(0)
        # Not set: redis-py's own default, 5 s.
        timeout = pool.connection_kwargs.get("socket_timeout", 5)
        await pool.disconnect()
        assert timeout is None or timeout > layer.brpop_timeout
        channel = await layer.new_channel()
        # A pop ends empty (after 5 s) while nothing is sent; then the message arrives.
        sender = asyncio.get_running_loop().call_later(
            layer.brpop_timeout + 1,
            lambda: asyncio.ensure_future(layer.send(channel, {"type": "live.changed"})),
        )
        try:
            message = await layer.receive(channel)
        finally:
            sender.cancel()
        assert message == {"type": "live.changed"}

    asyncio.run(run())
