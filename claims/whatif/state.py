"""The cluster as what-if sees it: the last database read, cached by fingerprint, plus assumptions.

Reading a 1,000-node cluster and parsing its slices costs far more than a what-if itself, so the
last `ClusterListing` is kept in the process with a `SliceCache` that outlives it; a cheap
fingerprint query (`claims.whatif.listing.cluster_fingerprint`) decides whether it is still current.
Assumed changes (`assume`) never touch that cached state: they build a `ClusterView` that shares
every unchanged object with it, so unchanged slices stay parsed.
"""

from __future__ import annotations

import copy
import gc
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from claims.whatif.inputs import JSON, WhatIfError
from claims.whatif.listing import (
    ClusterListing,
    cluster_fingerprint,
    forget_cached_rows,
    list_cluster,
)
from claims.whatif.nodefit import NodeUsage
from claims.whatif.options import check_added_devices
from claims.whatif.podtopology import PodRecord, TopologyLedger
from claims.whatif.shapes import shape_devices, stamp
from dralib.allocator import SelectorCache, SliceCache
from inventory.freshness import SWITCHING, Freshness

# Selector results are keyed by device content, which stays valid across cluster states; a cache
# past this many entries is dropped so a long-lived worker's memory stays bounded. An entry holds
# about 470 bytes (measured: 930 a device for one selector, two entries), so this is ~120 MB,
# room for one selector over 100,000 devices of distinct content.
_SELECTOR_CACHE_LIMIT = 250_000

_lock = threading.Lock()
# Held while the database is read (see cluster_state); taken before _lock, never inside it.
_read_lock = threading.Lock()
_cached: ClusterListing | None = None
_slice_cache = SliceCache()
_selector_caches: dict[tuple[bool, bool], SelectorCache] = {}
# When the last full collection of the frozen heap ran (0: never); see settle_heap.
_last_full_collect = 0.0
_FULL_COLLECT_SECONDS = 600.0


@dataclass
class ClusterView:
    """Allocator inputs for one what-if: the cluster state with assumed changes applied."""

    nodes: list[JSON]
    classes: list[JSON]
    slices: list[JSON]
    allocated_claims: list[JSON]
    fingerprint: str
    slice_cache: SliceCache
    classic_claims: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    # Per node name, what its pods request (`claims.whatif.nodefit`); added nodes have none.
    usage: dict[str, NodeUsage] = field(default_factory=dict)
    # Per node name, its pods' records for the topology filters (all of them, or only those
    # with required anti-affinity); read from the database when a question first needs them.
    pod_records: Callable[[bool], Mapping[str, Sequence[PodRecord]]] = field(
        default=lambda anti_affinity_only: {}
    )
    # The freshness read with the listing (None for views made by hand).
    freshness: Freshness | None = None

    def topology(self, namespace_labels: Mapping[str, Mapping[str, str]]) -> TopologyLedger:
        """A fresh ledger for PodTopologySpread and InterPodAffinity over this view's nodes."""
        return TopologyLedger(
            self.nodes,
            pods=lambda: self.pod_records(False),
            with_anti_affinity=lambda: self.pod_records(True),
            namespace_labels=namespace_labels,
        )


class ClusterSwitching(WhatIfError):
    """The tables hold two states of the cluster (a relist under way) and no complete state
    was read before: nothing can be answered honestly yet."""

    def __init__(self, freshness: Freshness) -> None:
        self.freshness = freshness
        super().__init__("cluster", f"{freshness.why}; try again in a few seconds")


def complete_state() -> ClusterListing | None:
    """The last complete state read (never one read while switching), or None."""
    return _cached


def cluster_state(
    *, fingerprint: str | None = None, versions: dict[str, str] | None = None
) -> tuple[ClusterListing, SliceCache]:
    """The current state and the slice cache, read again only when the fingerprint changed.

    One SliceCache lives as long as the process: a new read returns the same objects for slices
    that did not change, so only changed slices are parsed again and their pools rebuilt.
    Reads are made one at a time: requests arriving together after a change wait for one read
    instead of each making their own, and a slower, older read can never replace a newer one.

    A read made while the sync is switching (`inventory.freshness`: another cluster, or a
    relist under way) may hold two states of the cluster: it is never kept nor returned. The
    last complete state is returned instead (its fingerprint then differs from the one asked
    for), or ClusterSwitching raised when there is none.
    """
    global _cached
    wanted = fingerprint or cluster_fingerprint()
    cached = _cached
    if cached is not None and cached.fingerprint == wanted:
        return cached, _slice_cache
    with _read_lock:
        cached = _cached
        if cached is not None and cached.fingerprint == wanted:
            return cached, _slice_cache
        state = list_cluster(versions=versions)
        if state.freshness is not None and state.freshness.state == SWITCHING:
            if cached is None:
                raise ClusterSwitching(state.freshness)
            return cached, _slice_cache
        with _lock:
            _slice_cache.retain(state.slices)
            _cached = state
            settle_heap()
    return state, _slice_cache


def settle_heap(*, young_pass: bool = True) -> None:
    """Keep the cached cluster out of the collections that later requests set off.

    A 1,000-node state is hundreds of thousands of long-lived containers; every full collection
    scanned them again, which cost more than the what-if itself (headroom spent most of its time
    there). Frozen objects are skipped by the collector but still freed by reference counting when
    a newer state replaces them.

    After a change only the few objects read since are new: a young collection plus freezing them
    costs next to nothing, while a full collection of the frozen heap took half a second and made
    every what-if after a cluster change slow. Cycles among frozen objects that a newer state
    dropped are only found by a full collection, so one is made at most every
    `_FULL_COLLECT_SECONDS`: the memory such cycles can hold stays bounded (parsed state holds
    few cycles), and a churning cluster pays for a full collection once in many changes.
    (`gc.get_freeze_count()` walks the frozen heap: it is no cheap measure of its growth.)

    `young_pass=False` (the warm-up, which pauses the collector: all it built is young) freezes
    without the pass; the next full collection frees what garbage it froze.
    """
    global _last_full_collect
    now = time.monotonic()
    if not _last_full_collect:
        # The first state (a fresh process, its warm-up): frozen without even a young pass,
        # which would walk the whole state just read (0.35 s at 5,000 nodes; the warm-up
        # pauses the collector, so all of it is young) to find a few MB of garbage. The next
        # full collection below unfreezes and frees that garbage.
        _last_full_collect = now
        gc.freeze()
        return
    if now - _last_full_collect < _FULL_COLLECT_SECONDS:
        if young_pass:
            gc.collect(1)
        gc.freeze()
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _last_full_collect = time.monotonic()


def forget_cluster_state() -> None:
    """Drop the cached state and parsed objects (tests that rewrite the database)."""
    global _cached
    with _lock:
        _cached = None
        _slice_cache.clear()
    forget_cached_rows()


def selector_cache(*, consumable_capacity: bool, list_type_attributes: bool) -> SelectorCache:
    """The process-wide selector cache for one set of CEL options."""
    key = (consumable_capacity, list_type_attributes)
    with _lock:
        cache = _selector_caches.get(key)
        if cache is None or cache.entries() > _SELECTOR_CACHE_LIMIT:
            cache = SelectorCache(
                consumable_capacity=consumable_capacity, list_type_attributes=list_type_attributes
            )
            _selector_caches[key] = cache
        return cache


def forget_selector_caches() -> None:
    """Drop the selector caches (tests that need selectors evaluated again)."""
    with _lock:
        _selector_caches.clear()


def _name(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _slice_pool(obj: JSON) -> tuple[str, str]:
    spec = obj.get("spec") or {}
    return str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or "")


def build_view(
    state: ClusterListing, slice_cache: SliceCache, assume: Sequence[JSON]
) -> ClusterView:
    """Apply assumed changes in order; unknown names are a WhatIfError naming the change."""
    view = ClusterView(
        nodes=list(state.nodes),
        classes=list(state.classes),
        slices=list(state.slices),
        allocated_claims=list(state.allocated_claims),
        fingerprint=state.fingerprint,
        slice_cache=slice_cache,
        classic_claims=list(state.classic_claims),
        usage=state.usage,
        pod_records=state.pod_records,
        freshness=state.freshness,
    )
    added = 0
    for index, change in enumerate(assume):
        where = f"assume[{index}]"
        op = change["op"]
        if op == "add-nodes":
            added = check_added_devices(added + _added_devices(view, change), where=where)
        if op == "release-claim":
            _release_claim(view, change["claim"], where=where)
        elif op == "remove-node":
            _remove_node(view, change["node"], where=where)
        elif op == "add-nodes" and "shape" in change:
            _add_shaped_nodes(view, change)
        elif op == "add-nodes":
            _add_nodes(view, change["like"], change["count"], where=where)
        elif op in {"taint-device", "untaint-device"}:
            _retaint(view, change, where=where)
        elif op == "drop-pool":
            _drop_pool(view, change["pool"], where=where)
        view.assumed.append(describe_change(change))
    if len(slice_cache) > 2 * len(state.slices) + 1000:
        # Assumed changes parse copies of slices; keep the shared cache from growing with them.
        with _lock:
            slice_cache.retain([*state.slices, *view.slices])
    return view


def describe_change(change: JSON) -> str:
    """One line for the answer: what was assumed."""
    op = change["op"]
    if op == "release-claim":
        return f"claim {change['claim']} released"
    if op == "remove-node":
        return f"node {change['node']} removed"
    if op == "add-nodes" and "shape" in change:
        prefix = change["namePrefix"]
        return f"{change['count']} node(s) of the given shape added ({prefix}-1, ...)"
    if op == "add-nodes":
        return f"{change['count']} node(s) like {change['like']} added"
    if op == "taint-device":
        return f"device {change['device']} tainted {change['taint']['key']}"
    if op == "untaint-device":
        return f"device {change['device']} untainted {change['key'] or '(all taints)'}"
    return f"pool {change['pool']} dropped"


def _release_claim(view: ClusterView, ref: str, *, where: str) -> None:
    namespace, _, name = ref.partition("/")
    kept = [
        c
        for c in view.allocated_claims
        if ((c.get("metadata") or {}).get("namespace"), _name(c)) != (namespace, name)
    ]
    if len(kept) == len(view.allocated_claims):
        raise WhatIfError(f"{where}.claim", f"no allocated ResourceClaim {ref}")
    view.allocated_claims = kept


def _remove_node(view: ClusterView, node: str, *, where: str) -> None:
    if not any(_name(n) == node for n in view.nodes):
        raise WhatIfError(f"{where}.node", f"no node {node}")
    view.nodes = [n for n in view.nodes if _name(n) != node]
    # The node's own slices go with it; its claims' devices are then gone too.
    view.slices = [s for s in view.slices if (s.get("spec") or {}).get("nodeName") != node]


def _add_nodes(view: ClusterView, like: str, count: int, *, where: str) -> None:
    template = next((n for n in view.nodes if _name(n) == like), None)
    if template is None:
        raise WhatIfError(f"{where}.like", f"no node {like}")
    taken = {_name(n) for n in view.nodes}
    local = [s for s in view.slices if (s.get("spec") or {}).get("nodeName") == like]
    suffix = 0
    for _ in range(count):
        suffix += 1
        while f"{like}-clone-{suffix}" in taken:
            suffix += 1
        new_name = f"{like}-clone-{suffix}"
        taken.add(new_name)
        node = copy.deepcopy(template)
        meta = node.setdefault("metadata", {})
        meta["name"] = new_name
        meta["uid"] = f"whatif-{new_name}"
        labels = meta.setdefault("labels", {})
        if "kubernetes.io/hostname" in labels:
            labels["kubernetes.io/hostname"] = new_name
        view.nodes.append(node)
        for original in local:
            clone = copy.deepcopy(original)
            clone["metadata"]["name"] = f"{_name(original)}-{new_name}"
            spec = clone["spec"]
            spec["nodeName"] = new_name
            pool = spec.setdefault("pool", {})
            pool_name = str(pool.get("name") or "")
            pool["name"] = (
                pool_name.replace(like, new_name)
                if like in pool_name
                else f"{pool_name}-{new_name}"
            )
            view.slices.append(clone)
    view.nodes.sort(key=_name)


def _add_shaped_nodes(view: ClusterView, change: JSON) -> None:
    """Nodes that do not exist yet, from a checked shape: `<namePrefix>-<n>`, skipping names
    that are taken, each with the shape's slices stamped with its name."""
    taken = {_name(n) for n in view.nodes}
    prefix = change["namePrefix"]
    suffix = 0
    for _ in range(change["count"]):
        suffix += 1
        while f"{prefix}-{suffix}" in taken:
            suffix += 1
        name = f"{prefix}-{suffix}"
        taken.add(name)
        node, slices = stamp(change["shape"], name)
        view.nodes.append(node)
        view.slices.extend(slices)
    view.nodes.sort(key=_name)


def _find_device(view: ClusterView, device_id: str, *, where: str) -> list[int]:
    parts = device_id.split("/")
    driver, pool, device = parts[0], "/".join(parts[1:-1]), parts[-1]
    found = [
        index
        for index, s in enumerate(view.slices)
        if _slice_pool(s) == (driver, pool)
        and any(d.get("name") == device for d in (s.get("spec") or {}).get("devices") or [])
    ]
    if not found:
        raise WhatIfError(f"{where}.device", f"no device {device_id}")
    return found


def _retaint(view: ClusterView, change: JSON, *, where: str) -> None:
    device_name = change["device"].split("/")[-1]
    for index in _find_device(view, change["device"], where=where):
        patched = copy.deepcopy(view.slices[index])
        for device in patched["spec"].get("devices") or []:
            if device.get("name") != device_name:
                continue
            taints = list(device.get("taints") or [])
            if change["op"] == "taint-device":
                taints.append(dict(change["taint"]))
            else:
                taints = [t for t in taints if change["key"] and t.get("key") != change["key"]]
            if taints:
                device["taints"] = taints
            else:
                device.pop("taints", None)
        view.slices[index] = patched


def _drop_pool(view: ClusterView, pool_id: str, *, where: str) -> None:
    driver, _, pool = pool_id.partition("/")
    kept = [s for s in view.slices if _slice_pool(s) != (driver, pool)]
    if len(kept) == len(view.slices):
        raise WhatIfError(f"{where}.pool", f"no pool {pool_id}")
    view.slices = kept


def _added_devices(view: ClusterView, change: JSON) -> int:
    """Devices an add-nodes change would add to the view (counted before any is copied)."""
    if "shape" in change:
        per_node = shape_devices(change["shape"])
    else:
        per_node = sum(
            len((s.get("spec") or {}).get("devices") or [])
            for s in view.slices
            if (s.get("spec") or {}).get("nodeName") == change["like"]
        )
    return int(change["count"]) * per_node
