"""What SQLite's query planner assumes of the cluster column, written where it knows nothing.

Every index of a scoped model leads with `cluster` (`inventory.models.Scoped`): on PostgreSQL,
whose statistics know a cluster's share of a table, a cluster's rows are one range of each
index. SQLite keeps no statistics unless ANALYZE runs, and without them it takes every column
an equality names as narrowing the rows tenfold, the cluster included: a lookup by node then read
the whole cluster through the unique index that also gave its ORDER BY, and listings left
their covering index for any other. Its documentation lets applications write the statistics
table themselves ("Manual Control Of Query Plans Using SQLITE_STAT Tables"): for each index of a
scoped table with no statistics of its own, the row written here says that the cluster column
narrows nothing and each further column narrows as SQLite would assume anyway. What ANALYZE
measures (an operator may run it) is never overwritten.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import connections

from inventory.models import Scoped

# Rows SQLite assumes a table holds when it knows nothing, and rows per distinct value of a
# further indexed column (its own defaults, sqlite3 `sqlite3DefaultRowEst`).
ASSUMED_ROWS = 1_000_000
ROWS_PER_VALUE = 10


def seed_sqlite_statistics(using: str = "default") -> int:
    """Write the assumed statistics of every scoped table's indexes that have none; returns
    how many index rows were written. Nothing on other databases."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return 0
    tables = sorted(
        {
            model._meta.db_table
            for model in apps.get_models()
            if issubclass(model, Scoped) and not model._meta.abstract
        }
    )
    written = 0
    with connection.cursor() as cursor:
        # Creates the statistics table when there is none (and loads what there is).
        cursor.execute("ANALYZE sqlite_schema")
        cursor.execute("SELECT tbl, idx FROM sqlite_stat1")
        known = {(table, index) for table, index in cursor.fetchall()}
        rows: list[tuple[str, str, str]] = []
        for table in tables:
            for index, unique, partial in _indexes(cursor, table):
                if (table, index) in known:
                    continue
                columns = _columns(cursor, index)
                if not columns or columns[0] != "cluster_id":
                    continue
                rows.append((table, index, _assumed(columns, unique=unique, partial=partial)))
        if rows:
            cursor.executemany("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)", rows)
            written = len(rows)
            # Statistics are read when the schema is: load them now, here and elsewhere.
            cursor.execute("ANALYZE sqlite_schema")
    return written


def after_migrate(sender: object, using: str = "default", **kwargs: object) -> None:
    """post_migrate: a table SQLite remade in a migration lost its statistics."""
    seed_sqlite_statistics(using)


def _indexes(cursor: Any, table: str) -> list[tuple[str, bool, bool]]:
    cursor.execute(f'PRAGMA index_list("{table}")')
    # seq, name, unique, origin, partial
    return [(str(row[1]), bool(row[2]), bool(row[4])) for row in cursor.fetchall()]


def _columns(cursor: Any, index: str) -> list[str]:
    cursor.execute(f'PRAGMA index_info("{index}")')
    return [str(row[2]) for row in sorted(cursor.fetchall())]


def _assumed(columns: list[str], *, unique: bool, partial: bool) -> str:
    """`rows rows-per-cluster rows-per-prefix...`: the cluster narrows nothing, each further
    column tenfold, a whole unique key to one row; a partial index holds a tenth of the table
    (what makes it worth having), so that SQLite reads it rather than the table."""
    estimates = [ASSUMED_ROWS // ROWS_PER_VALUE if partial else ASSUMED_ROWS]
    for position, column in enumerate(columns):
        if column == "cluster_id":
            estimates.append(estimates[-1])
        elif unique and position == len(columns) - 1:
            estimates.append(1)
        else:
            estimates.append(max(1, min(estimates[-1], ROWS_PER_VALUE)))
    return " ".join(str(value) for value in estimates)
