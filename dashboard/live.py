"""Live updates: typed events that carry ids, sent to Channels groups after the commit.

Events never carry HTML: the browser re-fetches the affected fragment through the normal view,
so permissions and rendering have a single code path. This is the publishing half, which every
app uses; apps declare their topics with `dashboard.registry.register_live_topics`, and which
browser cares about an event is decided by the app that serves the websocket.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from dashboard.registry import live_topics

log = logging.getLogger(__name__)


class ChangedEvent(TypedDict):
    """`<topic>.changed`: these ids of the topic's objects changed (created, updated or deleted)."""

    type: Literal["live.changed"]
    topic: str
    ids: list[str]
    # One id per commit's events: pages refreshing for the same commit ask for the same
    # fragment URL (`live=<seq>`), so one render serves them all (see dashboard.fragments).
    seq: str


def group_name(topic: str) -> str:
    # Channels group names allow only ASCII letters, digits, hyphens, underscores and periods.
    return "live." + "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)[:90]


def send_now(changes: Mapping[str, Iterable[str]]) -> None:
    """Send one event per topic, all in one trip through the event loop."""
    layer = get_channel_layer()
    if layer is None:
        return
    seq = uuid.uuid4().hex
    events: list[tuple[str, ChangedEvent]] = [
        (topic, {"type": "live.changed", "topic": topic, "ids": list(ids), "seq": seq})
        for topic, ids in changes.items()
    ]

    async def send_all() -> None:
        for topic, event in events:
            try:
                await layer.group_send(group_name(topic), event)
            except Exception:  # a live-update hiccup must never fail a sync batch
                log.exception("live update for %s could not be sent", topic)

    try:
        if isinstance(layer, InMemoryChannelLayer):
            # Its queues belong to the consumers' loop, which async_to_sync finds when there
            # is one (one process, tests).
            async_to_sync(send_all)()
        else:
            asyncio.run_coroutine_threadsafe(send_all(), _sender_loop()).result(SEND_TIMEOUT)
    except Exception:
        log.exception("live updates could not be sent")


# Seconds a commit waits for its events to reach the channel layer.
SEND_TIMEOUT = 10.0
_sender: tuple[int, asyncio.AbstractEventLoop] | None = None
_sender_lock = threading.Lock()


def _sender_loop() -> asyncio.AbstractEventLoop:
    """An event loop on a daemon thread of this process, kept for every send.

    The Redis layer pools its connections per event loop: async_to_sync ran each send in a
    new loop, so every commit connected to Redis anew (40% of a lone change's commit, and of
    its way to the browser). Made again in a forked child, where the thread does not exist.
    """
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-publish", daemon=True).start()
            _sender = (os.getpid(), loop)
        return _sender[1]


def publish_changes(changes: Mapping[str, Iterable[str]]) -> None:
    """Send `changes` (topic -> ids) once the current transaction commits, never before."""
    frozen = {topic: list(ids) for topic, ids in changes.items() if ids}
    unknown = set(frozen) - live_topics()
    if unknown:  # no page can follow it: a typo, or an app that forgot to register it
        log.warning("live topics %s are not registered", ", ".join(sorted(unknown)))
    if frozen:
        transaction.on_commit(lambda: send_now(frozen))
