"""The synced tables keep one index per lookup (issue #25): no pattern-ops twins, nothing another
index covers, and every hot lookup still answered from an index on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, models, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from claims.models import Event, Pod, ResourceClaim
from inventory.clusters import forget as forget_clusters
from inventory.models import CounterSet, Device, Node, ResourceSlice
from tests.console.demo import load_demo

BEFORE = [("claims", "0011_claim_owner_pod_idx"), ("inventory", "0009_listing_versions_index")]
SINCE = datetime(2026, 11, 1, tzinfo=UTC)

# Every index each hot table keeps, primary key aside; a new one costs every write of the table.
KEPT = {
    Pod: {"pod_uid_unique", "pod_ns_name_unique", "pod_node_idx", "pod_synced_idx"},
    Node: {"node_uid_unique", "node_name_unique", "node_synced_idx", "node_versions_idx"},
    # None on a column a count bump changes (last_seen): those updates rewrite no index.
    Event: {"event_uid_unique", "event_ns_name_unique", "event_regarding_idx"},
    Device: {
        "device_slice_name_unique",
        "device_identity_idx",
        "device_node_idx",
        "inventory_device_pool_id_879cad9a",
        "inventory_device_tainted_723deaee",
    },
}

# (what, the query, the columns its index must lead with)
HOT_LOOKUPS: list[tuple[str, models.QuerySet, tuple[str, ...]]] = [
    ("pod by uid", Pod.objects.filter(uid="u"), ("uid",)),
    ("pod by name", Pod.objects.filter(namespace="ns", name="p"), ("namespace", "name")),
    ("pods of a namespace", Pod.objects.filter(namespace="ns"), ("namespace",)),
    ("pods of a node", Pod.objects.filter(node_name="n"), ("node_name",)),
    (
        "unbound pods with claims",
        Pod.objects.filter(node_name="", uses_claims=True),
        ("node_name",),
    ),
    # As claims.whatif.rows reads them: unordered.
    ("pods written since", Pod.objects.filter(synced_at__gte=SINCE).order_by(), ("synced_at",)),
    ("claim by uid", ResourceClaim.objects.filter(uid="u"), ("uid",)),
    (
        "claim by name",
        ResourceClaim.objects.filter(namespace="ns", name="c"),
        ("namespace", "name"),
    ),
    ("claims of a node", ResourceClaim.objects.filter(node_name="n"), ("node_name",)),
    ("claims in a state", ResourceClaim.objects.filter(state="pending"), ("state",)),
    (
        "allocated claims' versions",
        ResourceClaim.objects.filter(allocated_count__gt=0)
        .order_by()
        .values_list("namespace", "name", "uid", "resource_version", "synced_at"),
        ("namespace", "name", "uid", "resource_version", "synced_at"),
    ),
    (
        "events of objects (claims.events)",
        Event.objects.filter(
            namespace__in=["ns"], regarding_kind__in=["Pod"], regarding_name__in=["p"]
        ),
        ("namespace", "regarding_kind", "regarding_name"),
    ),
    ("node by uid", Node.objects.filter(uid="u"), ("uid",)),
    ("node by name", Node.objects.filter(name="n"), ("name",)),
    (
        "nodes' versions",
        Node.objects.order_by().values_list("name", "uid", "resource_version", "synced_at"),
        ("name", "uid", "resource_version", "synced_at"),
    ),
    ("slice by uid", ResourceSlice.objects.filter(uid="u"), ("uid",)),
    ("slice by name", ResourceSlice.objects.filter(name="s"), ("name",)),
    ("slices of a driver", ResourceSlice.objects.filter(driver="d"), ("driver",)),
    ("slices of a node", ResourceSlice.objects.filter(node_name="n"), ("node_name",)),
    ("devices of a slice", Device.objects.filter(slice_id=1), ("slice_id",)),
    ("devices of a node", Device.objects.filter(node_name="n"), ("node_name",)),
    ("counter sets of a slice", CounterSet.objects.filter(slice_id=1), ("slice_id",)),
]
# The index a plan reads: SQLite names a unique constraint's index sqlite_autoindex_<table>_N.
_SQLITE_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)")
_POSTGRESQL_INDEX = re.compile(
    r"Index (?:Only )?Scan (?:Backward )?using (\w+)|Index Scan on (\w+)"
)


def index_columns(table: str, index: str) -> tuple[str, ...]:
    """The columns of one index of `table`, in order."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"PRAGMA index_info({connection.ops.quote_name(index)})")
            return tuple(row[2] for row in cursor.fetchall())
        constraints = connection.introspection.get_constraints(cursor, table)
    return tuple(constraints[index]["columns"])


def migrate(targets: list[tuple[str, str]] | None = None) -> MigrationExecutor:
    """Migrate the test database to `targets` (default: every app's latest migration)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return MigrationExecutor(connection)


@pytest.fixture
def planner_prefers_indexes() -> Iterator[None]:
    """PostgreSQL scans a near-empty table rather than read an index; with sequential (and
    bitmap) scans priced out, its plan shows whether an index can answer the query at all. It
    plans by its statistics, which an empty table has none of (every index then looks alike,
    and the one that also gives the order wins), and prices a listing's index-only scan by the
    visibility map, which VACUUM fills (autovacuum, in a running database): the tables hold a
    small demo cluster, vacuumed and analyzed. SQLite plans by what `inventory.planner` wrote."""
    if connection.vendor != "postgresql":
        yield
        return
    load_demo(nodes=40, seed=3)
    now = timezone.now()
    Event.objects.bulk_create(
        Event(
            uid=f"event-{i}",
            name=f"event-{i}",
            namespace="ns",
            regarding_kind="Pod",
            regarding_name=f"pod-{i}",
            api_version="v1",
            raw={},
            obj={},
            first_seen=now,
            last_seen=now,
        )
        for i in range(2_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")


@pytest.mark.django_db
@pytest.mark.parametrize("model", list(KEPT), ids=lambda m: m.__name__)
def test_hot_tables_keep_only_their_indexes(model: type[models.Model]) -> None:
    """Pods and nodes have no pattern-ops twin and no index another one covers."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    names = {
        name
        for name, info in constraints.items()
        if (info["index"] or info["unique"]) and not info["primary_key"]
    }
    assert names == KEPT[model]


# Transactional: VACUUM runs outside a transaction only.
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("planner_prefers_indexes")
@pytest.mark.parametrize(
    ("lookup", "queryset", "leading"), HOT_LOOKUPS, ids=[h[0] for h in HOT_LOOKUPS]
)
def test_hot_lookups_read_an_index(
    lookup: str, queryset: models.QuerySet, leading: tuple[str, ...]
) -> None:
    """Each lookup the sync, the pages and what-if make is answered from an index that leads
    with the columns it looks up (or, for a listing, holds every column it reads)."""
    table = queryset.model._meta.db_table
    if queryset.query.values_select and connection.vendor == "postgresql":
        # A listing is answered from an index that holds every column it reads: whether
        # PostgreSQL takes it turns on how much of the visibility map VACUUM has set (its
        # plans differ run to run), so what is checked is that such an index is there.
        expected = ("cluster_id", *leading)
        with connection.cursor() as cursor:
            constraints = connection.introspection.get_constraints(cursor, table)
        covering = [
            name
            for name, info in constraints.items()
            if info["index"] and tuple(info["columns"][: len(expected)]) == expected
        ]
        assert covering, (table, expected)
        return
    plan = queryset.explain()
    pattern = _SQLITE_INDEX if connection.vendor == "sqlite" else _POSTGRESQL_INDEX
    found = pattern.search(plan)
    assert found, plan
    index = next(name for name in found.groups() if name)
    columns = index_columns(queryset.model._meta.db_table, index)
    # Every read is one cluster's (dashboard.scope), and every index leads with the cluster;
    # but a slice's devices and counters are found by their slice, which is one cluster's.
    expected = leading if leading[0] == "slice_id" else ("cluster_id", *leading)
    assert columns[: len(expected)] == expected, (plan, columns)


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_keep_their_uniqueness() -> None:
    """Pods and nodes stored under the old indexes are kept, and a second row of a uid or a
    name is still refused after the migrations."""
    try:
        old = migrate(BEFORE).loader.project_state(BEFORE).apps
        old_pod = old.get_model("claims", "Pod")
        old_node = old.get_model("inventory", "Node")
        for i in range(3):
            old_node.objects.create(uid=f"n{i}", name=f"node-{i}", api_version="v1", raw={}, obj={})
            old_pod.objects.create(
                uid=f"p{i}",
                name="web",
                namespace=f"ns-{i}",
                node_name=f"node-{i}",
                api_version="v1",
                raw={},
                obj={},
            )
    finally:
        migrate()
        # Migrating back removed the clusters; the rows written before are the default's now.
        forget_clusters()
    assert sorted(Pod.objects.values_list("namespace", "uid")) == [
        ("ns-0", "p0"),
        ("ns-1", "p1"),
        ("ns-2", "p2"),
    ]
    assert Node.objects.count() == 3
    refused: list[tuple[type[models.Model], dict[str, str]]] = [
        (Pod, {"uid": "p0", "name": "other", "namespace": "ns-9"}),
        (Pod, {"uid": "p9", "name": "web", "namespace": "ns-0"}),
        (Node, {"uid": "n0", "name": "node-9"}),
        (Node, {"uid": "n9", "name": "node-0"}),
    ]
    for model, fields in refused:
        with pytest.raises(IntegrityError), transaction.atomic():
            model.objects.create(api_version="v1", raw={}, obj={}, **fields)
