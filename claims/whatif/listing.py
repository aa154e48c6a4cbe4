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
per row and version (uid, resourceVersion, synced_at): a later read fetches only the rows that
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
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import connection, models, transaction
from django.db.models import Count, Max, Sum
from django.db.models.functions import Cast

from claims.models import Pod, ResourceClaim
from claims.whatif.nodefit import NodeUsage
from claims.whatif.podtopology import PodRecord, record_of
from claims.whatif.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from dashboard.gcpause import gc_paused
from dralib.allocator.taintrules import PatchedSlices, TaintRule
from inventory.freshness import Freshness, cluster_freshness
from inventory.models import DeviceClass, DeviceTaintRule, Node, ResourceSlice

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

# Rows fetched per query when only some changed (below SQLite's bound-parameter limit).
_FETCH_CHUNK = 500

# A read after the last one lists only the rows written since (`_RowCache._recent`), looking this
# far back from the newest write it saw: a writer takes its timestamp before it commits.
_RECENT_MARGIN = timedelta(minutes=10)

_cache_lock = threading.Lock()
# table label -> uid -> (version, decoded value); see _RowCache.
_row_caches: dict[str, _RowCache] = {}


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
    """A digest that changes whenever a row a ClusterListing is read from changes.

    Per table: the row count (catches deletions), the latest `synced_at` (every write of an
    object sets it: catches updates and creations) and the highest primary key. One statement
    for all tables instead of reading every (uid, resourceVersion). Call it inside
    `consistent_read()` to pair it with a read.
    """
    return fingerprint_of(table_versions())


def table_versions() -> dict[str, str]:
    """Per table a ClusterListing is read from, the version `cluster_fingerprint` digests."""
    # One statement of scalar subqueries, one aggregate each: a lone MAX over an indexed column
    # is one index lookup (synced_at is indexed for this), where one SELECT of COUNT and two MAXes
    # scanned every row of every table: 100 ms per question at 5,000 nodes.
    quote = connection.ops.quote_name
    parts = []
    for model in FINGERPRINT_MODELS:
        table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
        parts += [
            f"(SELECT COUNT(*) FROM {table})",
            f"(SELECT MAX({quote('synced_at')}) FROM {table})",
            f"(SELECT MAX({pk}) FROM {table})",
        ]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}")
        (row,) = cursor.fetchall()
    out: dict[str, str] = {}
    for index, model in enumerate(FINGERPRINT_MODELS):
        rows, last, top = row[3 * index : 3 * index + 3]
        # Only compared with versions read the same way: the driver's own text of the time.
        out[model._meta.label] = f"{rows}:{last if last is not None else ''}:{top}"
    return out


def fingerprint_of(versions: dict[str, str]) -> str:
    """The `cluster_fingerprint` of table versions read earlier."""
    digest = hashlib.sha256()
    for label, version in versions.items():
        digest.update(f"{label}:{version};".encode())
    return digest.hexdigest()


class _RowCache:
    """Decoded values of one table's rows by uid, valid while the row's version is unchanged."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[tuple[str, Any], Any]] = {}
        # The table's version at the last read and the list returned then.
        self.last: tuple[str, list[Any]] | None = None
        # The uids of the last read in the queryset's order, and the newest write seen then
        # (see `_recent`).
        self.order: list[str] | None = None
        self.newest: datetime | None = None
        # Every uid of the table (the queryset's and the others): a count tells deletions.
        self.table_uids: set[str] = set()

    def values(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        version: str | None = None,
        share: bool = False,
    ) -> list[Any]:
        """Decoded values in the queryset's order; only new or changed rows are fetched.

        `columns` are fetched for changed rows and passed to `decode` as a tuple. With the
        table's `version` (see `table_versions`) unchanged since the last read, the last list is
        returned without a query: after a change to one table the others cost nothing. `share`:
        equal small parts of the rows fetched together are made one object (`share_equal`).
        """
        if version is not None and self.last is not None and self.last[0] == version:
            return self.last[1]
        out = None
        if self.order is not None and self.newest is not None:
            out = self._recent(queryset, columns=columns, decode=decode, share=share)
        if out is None:
            out = self._values(queryset, columns=columns, decode=decode, share=share)
        self.last = (version, out) if version is not None else None
        return out

    def _recent(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> list[Any] | None:
        """The read after a change, from the rows written since the last read only; None when
        it cannot be told that way (a row joined the queryset: its place is the database's to
        say; or rows were deleted: the table's count says so), and the table is listed instead.

        Listing every row's version was most of a what-if right after a change at 20,000
        claims. A writer takes its timestamp before it commits, so rows written up to
        `_RECENT_MARGIN` before the newest one seen are looked at again.
        """
        assert self.order is not None and self.newest is not None
        # No ordering: rows written lately are found by the synced_at index, not by walking
        # the whole table in the order of another index.
        base = queryset.model._default_manager.order_by()
        newest = base.aggregate(newest=Max("synced_at"))["newest"]
        since = self.newest - _RECENT_MARGIN
        recent = _raw_rows(
            queryset.order_by()
            .filter(synced_at__gte=since)
            .values_list(
                "uid", "resource_version", Cast("synced_at", output_field=models.TextField())
            )
        )
        entries = self.entries
        if any(uid not in entries for uid, _, _ in recent):
            return None
        inside = {uid for uid, _, _ in recent}
        written = [
            uid for (uid,) in _raw_rows(base.filter(synced_at__gte=since).values_list("uid"))
        ]
        # Written lately and no longer in the queryset (a claim whose devices were freed).
        left = {uid for uid in written if uid not in inside and uid in entries}
        # The table's rows are those known plus those created since, unless some were deleted.
        created = {uid for uid in written if uid not in self.table_uids}
        if base.count() != len(self.table_uids) + len(created):
            return None
        versions = {uid: (rv, synced) for uid, rv, synced in recent}
        stale = [uid for uid, version in versions.items() if entries[uid][0] != version]
        fetched = self._fetch(
            [queryset.values_list("uid", *columns).filter(uid__in=part) for part in _parts(stale)],
            versions=versions,
            columns=columns,
            decode=decode,
            share=share,
        )
        if len(fetched) != len(stale):
            return None  # changed again meanwhile (outside a consistent read)
        if left or fetched:
            self.entries = entries = {
                uid: fetched.get(uid) or entry for uid, entry in entries.items() if uid not in left
            }
        if left:
            self.order = [uid for uid in self.order if uid not in left]
        if newest is not None and newest > self.newest:
            self.newest = newest
        self.table_uids.update(created)
        return [entries[uid][1] for uid in self.order]

    def _values(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> list[Any]:
        base = queryset.model._default_manager.order_by()
        newest = base.aggregate(newest=Max("synced_at"))["newest"]
        table_uids = {uid for (uid,) in _raw_rows(base.values_list("uid"))}
        # The write time as text: only compared, and PostgreSQL's timestamps cost a Python
        # conversion each otherwise.
        listed = _raw_rows(
            queryset.values_list(
                "uid", "resource_version", Cast("synced_at", output_field=models.TextField())
            )
        )
        entries = self.entries
        stale = [
            uid
            for uid, rv, synced in listed
            if (cached := entries.get(uid)) is None or cached[0] != (rv, synced)
        ]
        fetched: dict[str, tuple[tuple[str, Any], Any]] = {}
        if stale:
            versions = {uid: (rv, synced) for uid, rv, synced in listed}
            rows = queryset.values_list("uid", *columns)
            if len(stale) > len(listed) // 2:
                chunks: list[models.QuerySet[Any]] = [rows]
            else:
                chunks = [rows.filter(uid__in=part) for part in _parts(stale)]
            fetched = self._fetch(
                chunks, versions=versions, columns=columns, decode=decode, share=share
            )
        if fetched or len(entries) != len(listed):
            # Rows no longer listed are gone from the database: forget them. A row listed but
            # not fetched (written in between, outside a consistent read) is left for next time.
            self.entries = entries = {
                uid: entry
                for uid, _, _ in listed
                if (entry := fetched.get(uid) or entries.get(uid)) is not None
            }
        order = [uid for uid, _, _ in listed if uid in entries]
        # A row listed but not fetched is not known: the next read lists the table again.
        complete = len(order) == len(listed) and len(entries) == len(listed)
        self.order = order if complete else None
        self.newest = newest
        self.table_uids = table_uids
        return [entries[uid][1] for uid in order]

    def _fetch(
        self,
        chunks: Sequence[models.QuerySet[Any]],
        *,
        versions: Mapping[str, tuple[str, Any]],
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> dict[str, tuple[tuple[str, Any], Any]]:
        """The rows of `chunks` whose version differs from the kept one, decoded."""
        entries = self.entries
        fetched: dict[str, tuple[tuple[str, Any], Any]] = {}
        # Columns 1.. are `columns`; those reading the object are JSON.
        json_at = {i + 1 for i, c in enumerate(columns) if c == "obj" or c.startswith("obj__")}
        # One memo per read: it is dropped with the read, and holds no row after it.
        memo: dict[Any, Any] | None = {} if share else None
        for chunk in chunks:
            for row in _iter_raw_rows(chunk):
                uid, *values = _json_columns(row, json_at, memo)
                version = versions.get(uid)
                cached = entries.get(uid)
                if version is None or (cached is not None and cached[0] == version):
                    # Fetched with the whole table but unchanged: keep the same object.
                    continue
                # Inside a consistent read the row is the listed version; outside one it may
                # be newer, and is then fetched again next time: never older.
                fetched[uid] = (version, decode(tuple(values)))
        return fetched


def _parts(uids: Sequence[str]) -> list[Sequence[str]]:
    return [uids[start : start + _FETCH_CHUNK] for start in range(0, len(uids), _FETCH_CHUNK)]


def _raw_rows(queryset: models.QuerySet[Any]) -> list[tuple[Any, ...]]:
    """The queryset's rows as the database driver returns them, without Django's converters.

    Only versions are listed this way (compared with each other, never shown): converting
    every row's timestamp cost more than the rest of a read after a small change.
    """
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _iter_raw_rows(queryset: models.QuerySet[Any]) -> Iterator[tuple[Any, ...]]:
    """`_raw_rows`, fetched `_FETCH_CHUNK` rows at a time: a whole table's JSON text (50 MB of
    slices at 5,000 nodes) is never held at once beside the objects decoded from it."""
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(_FETCH_CHUNK):
            yield from rows


def _json_columns(
    row: tuple[Any, ...], json_at: set[int], memo: dict[Any, Any] | None = None
) -> tuple[Any, ...]:
    """A raw row with the JSON columns at `json_at` decoded (SQLite returns their text, psycopg
    decodes them itself), their equal parts shared through `memo` when one is given.

    orjson decodes a 1,000-node cluster's objects several times faster than the json module
    Django's JSONField uses, which was most of a cold read.
    """
    out = []
    for i, v in enumerate(row):
        if i in json_at:
            if isinstance(v, (str, bytes, bytearray)):
                v = orjson.loads(v)
            if memo is not None:
                v = share_equal(v, memo)
        out.append(v)
    return tuple(out)


# Containers with more entries than this are not shared (only their parts are): a big map is
# rarely equal to another, and its memo key would cost more than it could save.
_SHARE_MAX_ENTRIES = 8
# Strings longer than this are not shared: long ones are mostly unique (UIDs, messages).
_SHARE_MAX_CHARS = 64
# Deeper parts are left as they are (Python's recursion limit is below orjson's depth limit).
_SHARE_MAX_DEPTH = 32
# Memo tokens: `_UNSHARED` marks a part that is not in the memo (its parents are not shared
# either); `_NULL` stands for JSON null, as a hashable value of its own.
_UNSHARED = object()
_NULL = object()


def share_equal(value: Any, memo: dict[Any, Any]) -> Any:
    """`value` (decoded JSON) with its equal small parts made one object, in place.

    A 5,000-node cluster's slices are 100,000 devices whose attribute values and capacities
    are mostly the same few (`{"string": "a100"}`, `{"value": "40Gi"}`): decoded, each is its
    own dict, 400 MB in all; shared, 100 MB (the `memo` holds each distinct part once, as long
    as the caller keeps it). Objects read from the database are treated as immutable (see the
    module's docstring), so sharing is safe; whoever changes one copies it first.
    """
    return _share(value, memo, 0)[0]


def _share(value: Any, memo: dict[Any, Any], depth: int) -> tuple[Any, Any]:
    """(the shared value, its memo token): a string itself, a number typed (True, 1 and 1.0
    are equal in Python, never in JSON), a container the id of its shared copy."""
    kind = type(value)
    if kind is str:
        if len(value) <= _SHARE_MAX_CHARS:
            value = memo.setdefault(value, value)
        return value, value
    if kind is dict or kind is list:
        if depth > _SHARE_MAX_DEPTH:
            return value, _UNSHARED
        whole = len(value) <= _SHARE_MAX_ENTRIES
        parts: list[Any] = [kind]
        entries = value.items() if kind is dict else enumerate(value)
        for key, item in entries:
            shared, token = _share(item, memo, depth + 1)
            if shared is not item:
                value[key] = shared  # an existing key: the dict's size does not change
            if whole:
                if token is _UNSHARED:
                    whole = False
                else:
                    parts += (key, token) if kind is dict else (token,)
        if not whole:
            return value, _UNSHARED
        found = memo.setdefault(tuple(parts), value)
        return found, id(found)
    if value is None:
        return value, _NULL
    if kind is int or kind is bool or kind is float:
        return value, (kind, value)
    return value, _UNSHARED


def _row_cache(model: type[models.Model], purpose: str) -> _RowCache:
    key = f"{model._meta.label}:{purpose}"
    cache = _row_caches.get(key)
    if cache is None:
        cache = _row_caches[key] = _RowCache()
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
    for node, other in bound.exclude(other_requests={}).values_list("node_name", "other_requests"):
        usage = out.setdefault(node, NodeUsage())
        for name, value in (other or {}).items():
            usage.requested[name] = usage.requested.get(name, 0) + int(value)
    for node, ports in bound.exclude(host_ports=[]).values_list("node_name", "host_ports"):
        usage = out.setdefault(node, NodeUsage())
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
