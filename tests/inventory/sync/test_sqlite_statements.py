"""Bulk inserts on SQLite run with `?` placeholders written as such, within Django's errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.backends.sqlite3.base import SQLiteCursorWrapper
from django.test.utils import CaptureQueriesContext

from inventory.models import Node
from inventory.sync import new_row
from inventory.sync.core import insert_rows

pytestmark = pytest.mark.django_db


def _nodes(count: int, prefix: str = "u") -> list[Any]:
    return [
        new_row(
            Node,
            uid=f"{prefix}-{index}",
            name=f"{prefix}-node-{index}",
            raw={"n": index, "text": "50%s"},
            obj={"n": index},
            resource_version=str(index),
        )
        for index in range(count)
    ]


@pytest.fixture
def rewrites(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements Django's SQLite cursor rewrites from `%s` to `?` (spied, still run)."""
    seen: list[str] = []
    rewrite = SQLiteCursorWrapper.convert_query

    def counted(self: SQLiteCursorWrapper, query: str, **options: Any) -> str:
        seen.append(query)
        return rewrite(self, query, **options)

    monkeypatch.setattr(SQLiteCursorWrapper, "convert_query", counted)
    return seen


@pytest.fixture(autouse=True)
def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL inserts go through COPY or a pipeline: no placeholder rewrite")


def test_a_bulk_insert_is_not_rewritten_and_stores_the_rows(rewrites: list[str]) -> None:
    """1,500 rows (statements of several sizes): every row stored with its pk and values, no
    statement rewritten by Django."""
    rows = _nodes(1500)
    insert_rows(Node, rows, returning=("uid",))
    assert rewrites == []
    stored = {n.uid: (n.pk, n.raw, n.obj) for n in Node.objects.all()}
    assert stored == {row.uid: (row.pk, row.raw, row.obj) for row in rows}


def test_a_duplicate_key_raises_djangos_integrity_error(rewrites: list[str]) -> None:
    """The object-by-object fallback catches Django's IntegrityError: the driver's is translated."""
    insert_rows(Node, _nodes(3), returning=("uid",))
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Node, _nodes(2), returning=("uid",))
    assert rewrites == []
    assert Node.objects.count() == 3


def test_logged_statements_go_through_djangos_cursor(rewrites: list[str]) -> None:
    """A test counting queries (or DEBUG) sees every statement, as Django runs it."""
    with CaptureQueriesContext(connection) as queries:
        insert_rows(Node, _nodes(1500), returning=("uid",))
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == len(rewrites) > 1
    assert Node.objects.count() == 1500


def test_a_statement_wrapper_sees_the_statements(rewrites: list[str]) -> None:
    """`connection.execute_wrapper` (used to fake database faults) still wraps every insert."""
    wrapped: list[str] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        wrapped.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        insert_rows(Node, _nodes(10), returning=("uid",))
    assert len(wrapped) == 1
    assert Node.objects.count() == 10
