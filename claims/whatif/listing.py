"""The cluster as the scheduler's listers would give it: one consistent read of the database.

`list_cluster` reads nodes, device classes, ResourceSlices, allocated ResourceClaims and what the
pods bound to each node request (`NodeUsage`, summed by the database from the pods' projection
columns: no pod is decoded) in one
transaction and returns a `ClusterListing` (what-if keeps the latest in `claims.whatif.state` and
applies assumed changes to a `ClusterView` of it; `inventory.snapshot` is another thing: snapshot
files imported and exported). A listing has the shape of a conformance scenario
(`../shared/conformance/README.md`), all in the Kubernetes v1 JSON shape, so the allocator sees
exactly what the scheduler would see. DeviceTaintRules are applied
to the devices they select, as the scheduler does with the DeviceTaints feature.

Decoding every stored object is most of a read's cost, so decoded objects are kept in the process
per row and version (`claims.whatif.rows`): a later read fetches only the rows that
changed and returns the very same objects for the others, so caches keyed by object identity
(the allocator's `SliceCache`) keep their work. Returned objects must be treated as immutable.
Allocated claims are reduced to what the allocator reads: metadata and the allocation's results.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db import connection, models, transaction
from django.db.models import Count, Sum

from claims.models import Pod, ResourceClaim
from claims.whatif.nodefit import NodeUsage
from claims.whatif.podtopology import PodRecord, record_of
from claims.whatif.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from claims.whatif.rows import RowCache
from dashboard.gcpause import gc_paused
from dralib.allocator.taintrules import PatchedSlices, TaintRule
from inventory.freshness import Freshness, cluster_freshness
from inventory.models import DeviceClass, DeviceTaintRule, Node, ResourceSlice
from inventory.versions import read_versions

JSON = dict[str, Any]

# The tables whose rows make up a ClusterListing; the fingerprint covers exactly these.
FINGERPRINT_MODELS: tuple[type[models.Model], ...] = (
    Node,
    DeviceClass,
    DeviceTaintRule,
    ResourceSlice,
    ResourceClaim,
    Pod,
)

# Pods the scheduler's informer leaves out: they hold nothing on their node any more.
TERMINAL_PHASES = ("Succeeded", "Failed")


_cache_lock = threading.Lock()
# table label -> uid -> (version, decoded value); see _RowCache.
_row_caches: dict[str, RowCache] = {}


@dataclass
class ClusterListing:
    """Nodes, classes, slices and allocated claims listed at one point in time, with a
    fingerprint of that state: the allocator's inputs, as the scheduler lists them."""

    nodes: list[JSON]
    classes: list[JSON]
    slices: list[JSON]
    allocated_claims: list[JSON]
    fingerprint: str
    classic_claims: list[str] = field(default_factory=list)
    # Per node name, what its bound, unfinished pods request (nodes without pods are absent).
    usage: dict[str, NodeUsage] = field(default_factory=dict)
    # Per node name, its pods' records for the topology filters, read on first use
    # (`pod_records`; True: only the pods with required anti-affinity).
    pod_records: Callable[[bool], Mapping[str, Sequence[PodRecord]]] = field(
        default=lambda anti_affinity_only: {}
    )
    # The sync's freshness read in the same transaction: `switching` means the tables may hold
    # two states of the cluster (see claims.whatif.state.cluster_state).
    freshness: Freshness | None = None

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def scenario(self, claims: list[JSON], *, features: JSON | None = None) -> JSON:
        """A scenario for the multi-node form of the allocator (`nodes`)."""
        scenario: JSON = {
            "nodes": self.nodes,
            "classes": self.classes,
            "slices": self.slices,
            "claims": claims,
            "allocatedClaims": self.allocated_claims,
        }
        if features is not None:
            scenario["features"] = features
        return scenario


@contextmanager
def consistent_read() -> Iterator[None]:
    """A read-only transaction whose queries all see the same committed state."""
    # Inside an outer transaction (a request's, a test's) the isolation level is already fixed:
    # PostgreSQL only accepts SET TRANSACTION before the transaction's first query.
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def cluster_fingerprint() -> str:
    """A digest that changes whenever a transaction writing a table a ClusterListing is read
    from commits: the digest of the tables' versions (`inventory.versions`), one statement.
    Call it inside `consistent_read()` to pair it with a read.
    """
    return fingerprint_of(table_versions())


def table_versions() -> dict[str, str]:
    """Per table a ClusterListing is read from, the version `cluster_fingerprint` digests."""
    states = read_versions(FINGERPRINT_MODELS)
    return {
        model._meta.label: f"{state.version}:{state.deletes}"
        for model, state in zip(FINGERPRINT_MODELS, states, strict=True)
    }


def fingerprint_of(versions: dict[str, str]) -> str:
    """The `cluster_fingerprint` of table versions read earlier."""
    digest = hashlib.sha256()
    for label, version in versions.items():
        digest.update(f"{label}:{version};".encode())
    return digest.hexdigest()


def _row_cache(model: type[models.Model], purpose: str) -> RowCache:
    key = f"{model._meta.label}:{purpose}"
    cache = _row_caches.get(key)
    if cache is None:
        cache = _row_caches[key] = RowCache()
    return cache


def forget_cached_rows() -> None:
    """Drop every decoded row kept by earlier reads (tests that switch databases)."""
    with _cache_lock:
        _row_caches.clear()
        forget_node_usage()


def _first(values: tuple[Any, ...]) -> Any:
    return values[0]


def _allocated_claim(values: tuple[Any, ...]) -> tuple[str, JSON | None]:
    # Only what the allocator and the what-if changes read: who the claim is and its results.
    uid, namespace, name, classic, results = values
    ref = f"{namespace}/{name}"
    if classic:
        return ref, None
    claim: JSON = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "status": {"allocation": {"devices": {"results": results or []}}},
    }
    return ref, claim


_patched = PatchedSlices()
# The Pod table's version and the usage summed at it (most reads follow a change elsewhere).
_usage: tuple[str, dict[str, NodeUsage]] | None = None


def node_usage(version: str | None = None) -> dict[str, NodeUsage]:
    """Per node, what its bound pods that have not finished request, summed by the database;
    the few pods with other scalar requests or host ports are read one by one."""
    global _usage
    if version is not None and _usage is not None and _usage[0] == version:
        return _usage[1]
    bound = Pod.objects.exclude(node_name="").exclude(phase__in=TERMINAL_PHASES)
    out: dict[str, NodeUsage] = {}
    for node, cpu, memory, storage, pods in (
        bound.order_by()
        .values("node_name")
        .annotate(
            cpu=Sum("cpu_request"),
            memory=Sum("memory_request"),
            storage=Sum("storage_request"),
            pods=Count("pk"),
        )
        .values_list("node_name", "cpu", "memory", "storage", "pods")
    ):
        requested = {
            CPU: int(cpu or 0),
            MEMORY: int(memory or 0),
            EPHEMERAL_STORAGE: int(storage or 0),
        }
        out[node] = NodeUsage({k: v for k, v in requested.items() if v}, int(pods))
    # One scan of the table for both (no index finds them: 77,000 pods at 5,000 nodes, 0.1 s a
    # scan on SQLite), in no order: each node's sums and ports do not depend on it.
    few = bound.exclude(other_requests={}, host_ports=[]).order_by()
    for node, other, ports in few.values_list("node_name", "other_requests", "host_ports"):
        usage = out.setdefault(node, NodeUsage())
        for name, value in (other or {}).items():
            usage.requested[name] = usage.requested.get(name, 0) + int(value)
        usage.ports.extend(
            (str(ip), str(protocol), int(port)) for ip, protocol, port in ports or []
        )
    if version is not None:
        _usage = (version, out)
    return out


def forget_node_usage() -> None:
    global _usage
    _usage = None
    _records.clear()


# (Pod table version, anti-affinity only) -> per node, its pods' records (the last few reads).
_records: dict[tuple[str, bool], dict[str, list[PodRecord]]] = {}


def pod_records(version: str, *, anti_affinity_only: bool) -> dict[str, list[PodRecord]]:
    """Per node, the records (namespace, labels, required anti-affinity) of its bound pods that
    have not finished; a record is shared by every pod with the same ones (a ReplicaSet's)."""
    key = (version, anti_affinity_only)
    found = _records.get(key)
    if found is not None:
        return found
    rows = Pod.objects.exclude(node_name="").exclude(phase__in=TERMINAL_PHASES)
    if anti_affinity_only:
        rows = rows.exclude(anti_affinity=[])
    shared: dict[str, PodRecord] = {}
    out: dict[str, list[PodRecord]] = {}
    for node, namespace, labels, anti in rows.values_list(
        "node_name", "namespace", "labels", "anti_affinity"
    ).iterator(chunk_size=2000):
        text = orjson.dumps([namespace, labels, anti], option=orjson.OPT_SORT_KEYS).decode()
        record = shared.get(text)
        if record is None:
            record = shared[text] = record_of(namespace, labels or {}, anti or [])
        out.setdefault(node, []).append(record)
    for stale in [k for k in _records if k[0] != version]:
        del _records[stale]
    _records[key] = out
    return out


def list_cluster(
    *, node_names: Iterable[str] | None = None, versions: dict[str, str] | None = None
) -> ClusterListing:
    """Read nodes, classes, slices and allocated claims in one consistent transaction.

    `versions` (from `table_versions`, read just before) saves reading them again; a table
    written in between is then read newer than its version says, which only costs one more
    listing later (the next read sees a version it has not read at), never a stale state.
    """
    wanted = set(node_names) if node_names is not None else None
    with _cache_lock, gc_paused(), consistent_read():
        if versions is None:
            versions = table_versions()
        fingerprint = fingerprint_of(versions)
        nodes = _row_cache(Node, "obj").values(
            Node.objects.order_by("name"),
            columns=("obj",),
            decode=_first,
            version=versions[Node._meta.label],
            share=True,
        )
        classes = _row_cache(DeviceClass, "obj").values(
            DeviceClass.objects.order_by("name"),
            columns=("obj",),
            decode=_first,
            version=versions[DeviceClass._meta.label],
        )
        rules: list[TaintRule] = [
            (driver, pool, device, taint)
            for driver, pool, device, taint in DeviceTaintRule.objects.order_by("uid").values_list(
                "driver", "pool_name", "device_name", "taint"
            )
            if taint
        ]
        stored_slices = _row_cache(ResourceSlice, "obj").values(
            ResourceSlice.objects.filter(classic=False).order_by("name"),
            columns=("obj",),
            decode=_first,
            version=versions[ResourceSlice._meta.label],
            share=True,
        )
        slices = _patched.apply(stored_slices, rules)
        claims = _row_cache(ResourceClaim, "allocation").values(
            ResourceClaim.objects.filter(allocated_count__gt=0).order_by("namespace", "name"),
            columns=(
                "uid",
                "namespace",
                "name",
                "classic",
                "obj__status__allocation__devices__results",
            ),
            decode=_allocated_claim,
            version=versions[ResourceClaim._meta.label],
            share=True,
        )
        pod_version = versions[Pod._meta.label]
        usage = node_usage(pod_version)
        freshness = cluster_freshness()
    if wanted is not None:
        nodes = [n for n in nodes if (n.get("metadata") or {}).get("name") in wanted]
    return ClusterListing(
        nodes=nodes,
        classes=classes,
        slices=slices,
        allocated_claims=[claim for _, claim in claims if claim is not None],
        fingerprint=fingerprint,
        classic_claims=[ref for ref, claim in claims if claim is None],
        usage=usage,
        pod_records=lambda only: pod_records(pod_version, anti_affinity_only=only),
        freshness=freshness,
    )
