"""The live websocket: one connection per signed-in page, following the topics the page names.

A page connects to `/ws/live/?topics=overview,pool:12` and gets `{"topic", "kind", "ids"}`
messages, one per followed topic an event concerns; it then re-fetches its fragments through
the normal views. Scoped topics (`pool:<id>`, `node:<name>`, `namespace:<ns>`) listen to the
generic groups of `dashboard.live` and forward only the events that touch their scope.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db.models import Q

from dashboard.live import TOPICS, ChangedEvent, group_name

log = logging.getLogger(__name__)

MAX_TOPICS = 20
# What the overview shows: it follows every topic that moves one of its numbers.
OVERVIEW_GROUPS = ("nodes", "classes", "pools", "slices", "devices", "claims", "quotas", "sync")
SCOPED_GROUPS = {
    "pool": ("pools", "slices", "devices", "claims"),
    "node": ("nodes", "pools", "slices", "devices", "claims", "pods"),
    "namespace": ("claims", "pods", "templates", "quotas"),
}


class TopicError(ValueError):
    """A topic the page asked for that the live layer does not know."""


@dataclass
class Subscription:
    """One followed topic: the generic groups it listens to and what it remembers of its scope."""

    topic: str
    kind: str
    arg: str = ""
    groups: tuple[str, ...] = ()
    # Claims that held devices in the scope last time we looked: deallocations name no device.
    holders: set[str] = field(default_factory=set)


def parse_topic(topic: str) -> Subscription:
    """Parse `overview`, a generic topic, or `pool:<id>`, `node:<name>`, `namespace:<ns>`."""
    topic = topic.strip()
    if topic == "overview":
        return Subscription(topic, "overview", groups=OVERVIEW_GROUPS)
    if topic in TOPICS:
        return Subscription(topic, "generic", groups=(topic,))
    kind, _, arg = topic.partition(":")
    if kind not in SCOPED_GROUPS or not arg:
        raise TopicError(f"unknown live topic {topic!r}")
    if kind == "pool" and not arg.isdigit():
        raise TopicError(f"live topic {topic!r}: a pool is named by its numeric id")
    return Subscription(topic, kind, arg, groups=SCOPED_GROUPS[kind])


def parse_topics(query_string: bytes) -> list[Subscription]:
    values = parse_qs(query_string.decode("latin-1")).get("topics", [])
    names = [name for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise TopicError("no live topic requested (use ?topics=overview,pool:1)")
    if len(names) > MAX_TOPICS:
        raise TopicError(f"too many live topics ({len(names)} > {MAX_TOPICS})")
    return [parse_topic(name) for name in dict.fromkeys(names)]


def _split_ids(ids: Iterable[str]) -> tuple[set[int], set[tuple[str, str]], bool]:
    """Numeric row ids, (driver, pool) pairs from `driver/pool/device` keys, and a wildcard."""
    pks: set[int] = set()
    pools: set[tuple[str, str]] = set()
    wildcard = False
    for value in ids:
        if value == "*":
            wildcard = True
        elif value.isdigit():
            pks.add(int(value))
        else:
            parts = value.split("/")
            if len(parts) >= 3:
                pools.add((parts[0], parts[1]))
    return pks, pools, wildcard


def _claim_holders(q: Q) -> set[str]:
    from claims.models import AllocatedDevice

    return {str(pk) for pk in AllocatedDevice.objects.filter(q).values_list("claim_id", flat=True)}


def concerns(sub: Subscription, event: ChangedEvent) -> bool:
    """Does `event` touch the scope of `sub`? Runs database reads; call off the event loop."""
    if sub.kind in ("overview", "generic"):
        return True
    group, ids = event["topic"], [str(i) for i in event["ids"]]
    if sub.kind == "pool":
        return _concerns_pool(sub, group, ids)
    if sub.kind == "node":
        return _concerns_node(sub, group, ids)
    return _concerns_namespace(sub, group, ids)


def _concerns_pool(sub: Subscription, group: str, ids: list[str]) -> bool:
    from inventory.models import Device, Pool, ResourceSlice

    pool_id = int(sub.arg)
    pool = Pool.objects.filter(pk=pool_id).values_list("driver", "name").first()
    if group == "pools":
        return sub.arg in ids
    if pool is None:
        return False
    pks, keyed_pools, wildcard = _split_ids(ids)
    if group == "slices":
        return ResourceSlice.objects.filter(pk__in=pks, pool_id=pool_id).exists()
    holders_q = Q(driver=pool[0], pool=pool[1])
    if group == "devices":
        touched = (
            wildcard
            or tuple(pool) in keyed_pools
            or Device.objects.filter(pk__in=pks, pool_id=pool_id).exists()
        )
        if touched:
            sub.holders = _claim_holders(holders_q)
        return touched
    if group == "claims":
        now = _claim_holders(holders_q)
        touched = bool(set(ids) & (now | sub.holders))
        sub.holders = now
        return touched
    return False


def _concerns_node(sub: Subscription, group: str, ids: list[str]) -> bool:
    from claims.models import Pod, ResourceClaim
    from inventory.models import Device, Pool, ResourceSlice

    name = sub.arg
    if group == "nodes":
        return name in ids
    pks, keyed_pools, wildcard = _split_ids(ids)
    # Devices reachable through allNodes or a nodeSelector may concern any node.
    not_local = Q(all_nodes=True) | Q(node_selector__isnull=False)
    if group == "pools":
        return Pool.objects.filter(pk__in=pks).filter(Q(node_name=name) | Q(node_name="")).exists()
    if group == "slices":
        return (
            ResourceSlice.objects.filter(pk__in=pks)
            .filter(Q(node_name=name) | Q(all_nodes=True) | Q(node_selector__isnull=False))
            .exists()
        )
    if group == "devices":
        if wildcard:
            return True
        keyed = Q()
        for driver, pool_name in keyed_pools:
            keyed |= Q(driver=driver, pool_name=pool_name)
        touched = Device.objects.filter(Q(pk__in=pks) | keyed if keyed_pools else Q(pk__in=pks))
        return touched.filter(Q(node_name=name) | not_local).exists()
    if group == "claims":
        now = {
            str(pk)
            for pk in ResourceClaim.objects.filter(node_name=name).values_list("pk", flat=True)
        }
        touched = bool(set(ids) & (now | sub.holders))
        sub.holders = now
        return touched
    if group == "pods":
        return Pod.objects.filter(pk__in=pks, node_name=name).exists()
    return False


def _concerns_namespace(sub: Subscription, group: str, ids: list[str]) -> bool:
    from claims.models import Pod, ResourceClaim, ResourceClaimTemplate, ResourceQuota

    models: dict[str, Any] = {
        "claims": ResourceClaim,
        "pods": Pod,
        "templates": ResourceClaimTemplate,
        "quotas": ResourceQuota,
    }
    model = models.get(group)
    if model is None:
        return False
    pks, _, wildcard = _split_ids(ids)
    now = {str(pk) for pk in model.objects.filter(namespace=sub.arg).values_list("pk", flat=True)}
    # Deleted rows are gone from the database; remember which ids were ours.
    key = {f"{group}:{pk}" for pk in now}
    touched = wildcard or bool({f"{group}:{pk}" for pk in pks} & (key | sub.holders))
    sub.holders = {h for h in sub.holders if not h.startswith(f"{group}:")} | key
    return touched


def _prime(subscriptions: list[Subscription]) -> None:
    """Remember the claims each scope holds now, so that a later release is noticed."""
    from claims.models import ResourceClaim
    from inventory.models import Pool

    for sub in subscriptions:
        if sub.kind == "pool":
            pool = Pool.objects.filter(pk=int(sub.arg)).values_list("driver", "name").first()
            if pool is not None:
                sub.holders = _claim_holders(Q(driver=pool[0], pool=pool[1]))
        elif sub.kind == "node":
            sub.holders = {
                str(pk)
                for pk in ResourceClaim.objects.filter(node_name=sub.arg).values_list(
                    "pk", flat=True
                )
            }
        elif sub.kind == "namespace":
            for group in SCOPED_GROUPS["namespace"]:
                _concerns_namespace(sub, group, [])


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Forwards `live.changed` events of the followed topics to one signed-in browser."""

    subscriptions: list[Subscription]
    joined: set[str]

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
        await database_sync_to_async(_prime)(self.subscriptions)
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
        for sub in self.subscriptions:
            if event["topic"] not in sub.groups:
                continue
            if await database_sync_to_async(concerns)(sub, event):
                await self.send_json(
                    {"topic": sub.topic, "kind": event["topic"], "ids": event["ids"]}
                )
