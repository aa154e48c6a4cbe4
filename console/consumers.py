"""The live websocket: one connection per signed-in page, following the topics the page names.

A page connects to `/ws/live/?topics=overview,pool:gpu.example.com/node-1` and gets
`{"topic", "kind", "ids"}` messages, one per followed topic an event concerns; it then
re-fetches its fragments through the normal views. Scoped topics (`pool:<driver>/<pool>`,
`node:<name>`, `namespace:<ns>`) listen to the generic groups of `dashboard.live` and forward
only the events that touch their scope; which events do is decided by `console.live.concerns`
(the consumer only translates)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from claims.whatif.jobs import job_owner, owner_of
from console.live import (
    SCOPED_GROUPS,
    Subscription,
    concerns,
    prime_holders,
    shared_visible_ids,
    unscoped,
)
from dashboard.live import ChangedEvent, group_name
from dashboard.registry import live_topics
from inventory.visibility import NOTHING, Visibility, visibility_of_user

log = logging.getLogger(__name__)

MAX_TOPICS = 20
# What the overview shows: it follows every topic that moves one of its numbers.
OVERVIEW_GROUPS = ("nodes", "classes", "pools", "slices", "devices", "claims", "quotas", "sync")


class TopicError(ValueError):
    """A topic the page asked for that the live layer does not know."""


def parse_topic(topic: str) -> Subscription:
    """Parse `overview`, a generic topic, or `pool:<driver>/<pool>`, `node:<name>`,
    `namespace:<ns>` (pool names may hold `/`, driver names do not)."""
    topic = topic.strip()
    if topic == "overview":
        return Subscription(topic, "overview", groups=OVERVIEW_GROUPS)
    if topic in live_topics():
        return Subscription(topic, "generic", groups=(topic,))
    kind, _, arg = topic.partition(":")
    if kind not in SCOPED_GROUPS or not arg:
        raise TopicError(f"unknown live topic {topic!r}")
    driver, _, pool = arg.partition("/")
    if kind == "pool" and not (driver and pool):
        raise TopicError(f"live topic {topic!r}: a pool is named <driver>/<pool>")
    return Subscription(topic, kind, arg, groups=SCOPED_GROUPS[kind])


def parse_topics(query_string: bytes) -> list[Subscription]:
    values = parse_qs(query_string.decode("latin-1")).get("topics", [])
    names = [name for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise TopicError("no live topic requested (use ?topics=overview,node:node-1)")
    if len(names) > MAX_TOPICS:
        raise TopicError(f"too many live topics ({len(names)} > {MAX_TOPICS})")
    return [parse_topic(name) for name in dict.fromkeys(names)]


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Forwards `live.changed` events of the followed topics to one signed-in browser."""

    subscriptions: list[Subscription]
    joined: set[str]
    seen: Visibility = NOTHING

    async def connect(self) -> None:
        self.subscriptions = []
        self.joined = set()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            self.subscriptions = parse_topics(self.scope.get("query_string", b""))
        except TopicError as exc:
            log.info("live socket refused: %s", exc)
            await self.close(code=4400)
            return
        self.seen = await database_sync_to_async(visibility_of_user)(user)
        refused = [
            sub.topic
            for sub in self.subscriptions
            if sub.kind == "namespace" and not self.seen.allows(sub.arg)
        ]
        if refused:
            # As if the namespace held nothing to follow: the page could not be opened either.
            log.info("live socket refused: %s may not see %s", user, ", ".join(refused))
            await self.close(code=4403)
            return
        await database_sync_to_async(prime_holders)(self.subscriptions)
        for sub in self.subscriptions:
            for group in sub.groups:
                if group not in self.joined:
                    self.joined.add(group)
                    await self.channel_layer.group_add(group_name(group), self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", set()):
            await self.channel_layer.group_discard(group_name(group), self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The socket is one-way; topics are fixed when it opens.
        return None

    async def live_changed(self, event: ChangedEvent) -> None:
        ids = [str(i) for i in event["ids"]]
        user = self.scope.get("user")
        if event["topic"] == "whatif" and not getattr(user, "is_superuser", False):
            # A what-if job is its submitter's: others do not hear of it.
            owner = owner_of(user)
            ids = [i for i in ids if await database_sync_to_async(job_owner)(i) == owner]
            if not ids:
                return
            event = {**event, "ids": ids}
        elif not self.seen.everything:
            ids = await shared_visible_ids(event, ids, self.seen)
            if not ids:
                return
            event = {**event, "ids": ids}
        for sub in self.subscriptions:
            if event["topic"] not in sub.groups:
                continue
            # Unscoped pages skip the trip to the database thread: one per page and event, one
            # after the other on the one thread every socket's database work runs on.
            if unscoped(sub) or await database_sync_to_async(concerns)(sub, event):
                await self.send_json(
                    {
                        "topic": sub.topic,
                        "kind": event["topic"],
                        "ids": ids,
                        "seq": event.get("seq", ""),
                    }
                )
