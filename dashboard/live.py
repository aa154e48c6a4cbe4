"""Live updates: typed events that carry ids, sent to Channels groups after the commit.

Events never carry HTML: the browser re-fetches the affected fragment through the normal view,
so permissions and rendering have a single code path.

Scoped subscriptions (`pool:<id>`, `node:<name>`, `namespace:<ns>`) listen to generic groups;
`concerns(subscription, event)` decides with a few database reads whether an event touches the
scope, and `prime_holders` remembers what the scope holds so that a later release is noticed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import Q

log = logging.getLogger(__name__)

Topic = Literal[
    "nodes",
    "classes",
    "pools",
    "slices",
    "devices",
    "claims",
    "templates",
    "pods",
    "quotas",
    "sync",
    "whatif",
]
TOPICS: tuple[str, ...] = Topic.__args__  # type: ignore[attr-defined]


class ChangedEvent(TypedDict):
    """`<topic>.changed`: these ids of the topic's objects changed (created, updated or deleted)."""

    type: Literal["live.changed"]
    topic: str
    ids: list[str]


def group_name(topic: str) -> str:
    # Channels group names allow only ASCII letters, digits, hyphens, underscores and periods.
    return "live." + "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)[:90]


def send_now(changes: Mapping[str, Iterable[str]]) -> None:
    """Send one event per topic, all in one trip through the event loop."""
    layer = get_channel_layer()
    if layer is None:
        return
    events: list[tuple[str, ChangedEvent]] = [
        (topic, {"type": "live.changed", "topic": topic, "ids": list(ids)})
        for topic, ids in changes.items()
    ]

    async def send_all() -> None:
        for topic, event in events:
            try:
                await layer.group_send(group_name(topic), event)
            except Exception:  # a live-update hiccup must never fail a sync batch
                log.exception("live update for %s could not be sent", topic)

    try:
        async_to_sync(send_all)()
    except Exception:
        log.exception("live updates could not be sent")


def publish_changes(changes: Mapping[str, Iterable[str]]) -> None:
    """Send `changes` (topic -> ids) once the current transaction commits, never before."""
    frozen = {topic: list(ids) for topic, ids in changes.items() if ids}
    if frozen:
        transaction.on_commit(lambda: send_now(frozen))


SCOPED_GROUPS = {
    "pool": ("pools", "slices", "devices", "claims"),
    "node": ("nodes", "pools", "slices", "devices", "claims", "pods"),
    "namespace": ("claims", "pods", "templates", "quotas"),
}


@dataclass
class Subscription:
    """One followed topic: the generic groups it listens to and what it remembers of its scope."""

    topic: str
    kind: str
    arg: str = ""
    groups: tuple[str, ...] = ()
    # Claims that held devices in the scope last time we looked: deallocations name no device.
    holders: set[str] = field(default_factory=set)


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


def prime_holders(subscriptions: list[Subscription]) -> None:
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
