"""What a batch costs the database, by statements: the same for 60 objects as for 180; on
PostgreSQL the update scratch table is kept by the session, not made again in every batch; the
initial sync reads no stored rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from claims.models import ResourceClaim
from inventory.models import Node
from inventory.sync import Replacement, apply_events, replace_all
from inventory.sync.pgcopy import COPY_MIN_ROWS, STATEMENTS, scratch_name
from tests.inventory.sync.objects import node
from tests.inventory.sync.test_write import claim


@contextmanager
def statements() -> Iterator[list[int]]:
    """Statements sent inside the block: Django's query log plus the bulk paths' psycopg
    cursors (which the log never sees); the count is in the yielded list once the block ends."""
    counted: list[int] = []
    before = sum(STATEMENTS.values())
    with CaptureQueriesContext(connection) as queries:
        yield counted
    counted.append(len(queries.captured_queries) + sum(STATEMENTS.values()) - before)


def modified(count: int, rv: str) -> list[tuple[str, dict]]:
    return [("MODIFIED", claim(f"c{i}", rv=rv)) for i in range(count)]


@pytest.mark.django_db(transaction=True)
def test_an_update_batch_costs_the_same_statements_for_more_objects():
    """Updating 60 or 180 stored claims (COPY on PostgreSQL) sends the same statements, and
    within the watch sink's budget: no savepoint of apply_events' own, nothing per object."""
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i}", rv="1")) for i in range(180)])
    sent = []
    for count, rv in ((60, "2"), (180, "3")):
        with statements() as counted:
            result = apply_events("ResourceClaim", modified(count, rv))
        assert result.upserted == count
        sent.append(counted[0])
    assert sent[0] == sent[1]
    # BEGIN, SAVEPOINT, stored rows, allocations and reservations replaced, templates, the
    # update (scratch, COPY, UPDATE), RELEASE, skip records, COMMIT.
    assert sent[1] <= 16
    assert set(ResourceClaim.objects.values_list("resource_version", flat=True)) == {"3"}


@pytest.mark.django_db(transaction=True)
def test_two_updates_of_one_table_in_one_transaction_each_write_their_own_rows():
    """Two bulk updates of one table in one transaction (the scratch table is shared) leave
    each row with its own batch's state, and the scratch empty."""
    count = COPY_MIN_ROWS + 5
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i}", rv="1")) for i in range(count * 2)])
    first = [("MODIFIED", claim(f"c{i}", rv="2")) for i in range(count)]
    second = [("MODIFIED", claim(f"c{i}", rv="3")) for i in range(count, count * 2)]
    with transaction.atomic():
        apply_events("ResourceClaim", first)
        apply_events("ResourceClaim", second)
    versions = dict(ResourceClaim.objects.values_list("name", "resource_version"))
    assert {versions[f"c{i}"] for i in range(count)} == {"2"}
    assert {versions[f"c{i}"] for i in range(count, count * 2)} == {"3"}


@pytest.mark.django_db(transaction=True)
def test_the_update_scratch_table_is_made_once_per_session():
    """On PostgreSQL the scratch table of an update survives its batch, empty, and the next
    batch uses the same table (no catalog writes per batch)."""
    if connection.vendor != "postgresql":
        pytest.skip("the scratch table is PostgreSQL's COPY path; SQLite updates by statement")
    count = COPY_MIN_ROWS + 5
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i}", rv="1")) for i in range(count)])
    oids = []
    for rv in ("2", "3"):
        apply_events("ResourceClaim", modified(count, rv))
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.oid, c.relname FROM pg_class c "
                # This session's own: pooled sessions of earlier tests keep theirs too.
                "WHERE c.relname LIKE %s AND c.relnamespace = pg_my_temp_schema()",
                [scratch_name(ResourceClaim._meta.db_table, [])[: -len("00000000")] + "%"],
            )
            found = cursor.fetchall()
            assert len(found) == 1
            oids.append(found[0][0])
            cursor.execute(f'SELECT count(*) FROM "{found[0][1]}"')
            assert cursor.fetchone()[0] == 0
    assert oids[0] == oids[1]
    assert set(ResourceClaim.objects.values_list("resource_version", flat=True)) == {"3"}


def listed_node(name: str, *, rv: str) -> dict:
    obj = node(name)
    obj["metadata"].update(uid=f"uid-{name}", resourceVersion=rv)
    return obj


def node_reads(queries: CaptureQueriesContext) -> int:
    return sum(
        1
        for query in queries.captured_queries
        if query["sql"].startswith("SELECT") and '"inventory_node"' in query["sql"]
    )


@pytest.mark.django_db(transaction=True)
def test_a_relist_into_an_empty_kind_reads_no_stored_rows():
    """The initial sync (nothing of the kind stored) reads the kind's table once, to see it is
    empty, for any number of objects; a relist over stored rows reads them."""
    nodes = [listed_node(f"n{i}", rv="1") for i in range(COPY_MIN_ROWS * 3)]
    with CaptureQueriesContext(connection) as first:
        result = replace_all("Node", [(obj, None) for obj in nodes])
    assert result.upserted == len(nodes)
    assert node_reads(first) == 1
    with CaptureQueriesContext(connection) as again:
        result = replace_all("Node", [(obj, None) for obj in nodes])
    assert (result.upserted, result.unchanged) == (0, len(nodes))
    assert node_reads(again) > 1
    assert sorted(Node.objects.values_list("name", flat=True)) == sorted(
        f"n{i}" for i in range(len(nodes))
    )


@pytest.mark.django_db(transaction=True)
def test_an_object_stored_while_the_kind_was_taken_for_empty_is_updated():
    """Should an object be stored after the relist saw the kind empty, its insert fails on the
    uid and the segment is written again reading what is stored: one row, the listed state."""
    with transaction.atomic():
        replacement = Replacement("Node")
        assert replacement.was_empty
        apply_events("Node", [("ADDED", listed_node("n0", rv="1"))])
        for i in range(COPY_MIN_ROWS + 1):
            replacement.add(listed_node(f"n{i}", rv="2"))
        result = replacement.finish(publish=False)
    assert result.skipped == []
    assert dict(Node.objects.values_list("name", "resource_version")) == {
        f"n{i}": "2" for i in range(COPY_MIN_ROWS + 1)
    }
