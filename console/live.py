"""Live-update scoping: which open page an event concerns.

Scoped subscriptions (`pool:<driver>/<pool>`, `node:<name>`, `namespace:<ns>`) listen to generic
groups; `concerns(subscription, event)` decides with a few database reads whether an event touches
the scope, and `prime_holders` remembers what the scope holds so that a later release is noticed.
A pool is followed by its name, as its page is: a pool replaced with its node gets a new row,
and the page follows the new one. An event whose ids are `*` (a snapshot import) touches every
scope.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Q

from claims.models import (
    AllocatedDevice,
    Event,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from dashboard.live import ChangedEvent
from inventory.models import Device, Pool, ResourceSlice
from inventory.visibility import Visibility, scope_namespaced

SCOPED_GROUPS = {
    "pool": ("pools", "slices", "devices", "claims"),
    "node": ("nodes", "pools", "slices", "devices", "claims", "pods"),
    "namespace": ("claims", "pods", "templates", "quotas", "events"),
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
    # A pool scope: the pool's row ids seen so far (a replaced pool's old row is deleted).
    rows: set[str] = field(default_factory=set)


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

    return {str(pk) for pk in AllocatedDevice.objects.filter(q).values_list("claim_id", flat=True)}


def unscoped(sub: Subscription) -> bool:
    """Does every event of the subscription's groups concern it, with no database read?"""
    return sub.kind in ("overview", "generic")


def concerns(sub: Subscription, event: ChangedEvent) -> bool:
    """Does `event` touch the scope of `sub`? Runs database reads; call off the event loop."""
    if unscoped(sub):
        return True
    group, ids = event["topic"], [str(i) for i in event["ids"]]
    if "*" in ids:
        prime_holders([sub])
        return True
    if sub.kind == "pool":
        return _concerns_pool(sub, group, ids)
    if sub.kind == "node":
        return _concerns_node(sub, group, ids)
    return _concerns_namespace(sub, group, ids)


def pool_name(sub: Subscription) -> tuple[str, str]:
    """(driver, pool) of a `pool:<driver>/<pool>` scope; pool names may hold `/`."""
    driver, _, pool = sub.arg.partition("/")
    return driver, pool


def _pool_row(sub: Subscription) -> int | None:
    driver, name = pool_name(sub)
    pk = Pool.objects.filter(driver=driver, name=name).values_list("pk", flat=True).first()
    if pk is not None:
        sub.rows.add(str(pk))
    return pk


def _concerns_pool(sub: Subscription, group: str, ids: list[str]) -> bool:

    driver, name = pool_name(sub)
    known = set(sub.rows)
    pool_id = _pool_row(sub)
    if group == "pools":
        # The row now (created or changed) or one it had before (deleted with its node).
        return bool(set(ids) & (known | sub.rows))
    if pool_id is None:
        return False
    pks, keyed_pools, wildcard = _split_ids(ids)
    if group == "slices":
        return ResourceSlice.objects.filter(pk__in=pks, pool_id=pool_id).exists()
    holders_q = Q(driver=driver, pool=name)
    if group == "devices":
        touched = (
            wildcard
            or (driver, name) in keyed_pools
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

    models: dict[str, Any] = {
        "claims": ResourceClaim,
        "pods": Pod,
        "templates": ResourceClaimTemplate,
        "quotas": ResourceQuota,
        "events": Event,
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

    for sub in subscriptions:
        if sub.kind == "pool":
            driver, name = pool_name(sub)
            _pool_row(sub)
            sub.holders = _claim_holders(Q(driver=driver, pool=name))
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


def visible_ids(group: str, ids: list[str], seen: Visibility) -> list[str]:
    """The ids of an event a person may hear of: for namespaced groups, only rows of namespaces
    `seen` allows. A deleted row's namespace is unknown, so its id is dropped (fail closed), as
    is every id of a namespaced group without a model here."""
    if seen.everything or group not in SCOPED_GROUPS["namespace"]:
        return ids
    model = _NAMESPACED_MODELS.get(group)
    if model is None or "*" in ids:
        return ["*"] if model is not None and "*" in ids else []
    pks = [int(value) for value in ids if value.isdigit()]
    rows = scope_namespaced(model.objects.filter(pk__in=pks), seen)
    return [str(pk) for pk in rows.values_list("pk", flat=True)]


# Recent answers of `shared_visible_ids`, by (event seq, topic, visibility key).
_VISIBLE_KEPT = 256
_visible: OrderedDict[tuple[str, str, str], asyncio.Future[list[str]]] = OrderedDict()


async def shared_visible_ids(event: ChangedEvent, ids: list[str], seen: Visibility) -> list[str]:
    """`visible_ids` once per event and visibility for every socket of this process.

    Every open page of a person who does not see everything filtered each event on its own: a
    query, on a connection of its own, per page (100 pages: 100 queries one after the other on
    the thread database work runs on, the last page's event 0.9 s late). An event's seq names
    one commit, so its ids are the same for every socket; people with the same visibility key
    see the same rows.
    """
    seq = str(event.get("seq") or "")
    if not seq:
        result: list[str] = await database_sync_to_async(visible_ids)(event["topic"], ids, seen)
        return result
    key = (seq, event["topic"], seen.key)
    future = _visible.get(key)
    if future is None:
        future = asyncio.get_running_loop().create_future()
        _visible[key] = future
        while len(_visible) > _VISIBLE_KEPT:
            _visible.popitem(last=False)
        try:
            future.set_result(await database_sync_to_async(visible_ids)(event["topic"], ids, seen))
        except BaseException:
            # Failed or cancelled (its socket closed): the sockets waiting ask on their own.
            _visible.pop(key, None)
            future.cancel()
            raise
    try:
        return list(await future)
    except asyncio.CancelledError:
        if not future.cancelled():
            raise  # this socket's own task is being cancelled
    result = await database_sync_to_async(visible_ids)(event["topic"], ids, seen)
    return result


_NAMESPACED_MODELS: dict[str, Any] = {
    "claims": ResourceClaim,
    "pods": Pod,
    "templates": ResourceClaimTemplate,
    "quotas": ResourceQuota,
    "events": Event,
}
