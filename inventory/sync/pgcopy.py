"""PostgreSQL's bulk paths of the write path: COPY for new rows, COPY into a scratch table and one
UPDATE for changed rows, on a psycopg cursor that binds on the server.

`core.insert_rows` and `core.update_rows` choose these from COPY_MIN_ROWS rows on; below, and on
SQLite, they run plain statements. `STATEMENTS` counts what these paths send (Django's query log
never sees a psycopg cursor), so tests can prove a batch's round trips on PostgreSQL.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# From this many rows PostgreSQL writes by COPY (fewer: one pipelined statement per row).
COPY_MIN_ROWS = 50

# Statements sent on server-bound cursors, by kind ("execute", "executemany", "copy").
STATEMENTS: Counter[str] = Counter()


class _CountingCursor:
    """A psycopg cursor that counts what it sends in STATEMENTS."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        STATEMENTS["execute"] += 1
        return self._cursor.execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        STATEMENTS["executemany"] += 1
        return self._cursor.executemany(*args, **kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        STATEMENTS["copy"] += 1
        return self._cursor.copy(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def server_bound_cursor(connection: Any) -> Iterator[Any]:
    """A plain psycopg cursor on Django's connection (same transaction). It binds parameters
    on the server and runs executemany in one pipeline; Django's cursor binds on the client,
    quoting every value in Python: a third of an initial sync's time. Errors are Django's, as
    from Django's cursor: the writer falls back to object by object on IntegrityError."""
    import psycopg

    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield _CountingCursor(cursor)


def scratch_name(table: str, names: list[str]) -> str:
    """The scratch table for updates of `names` in `table`: one per column set (a kind always
    updates the same columns), within PostgreSQL's 63 characters."""
    digest = zlib.crc32("\0".join(names).encode()) & 0xFFFFFFFF
    return f"sync_update_{table[:40]}_{digest:08x}"


def copy_update(
    connection: Any,
    opts: Any,
    columns: list[Any],
    rows: list[Any],
    prepare: Callable[[list[Any]], list[Any]],
) -> None:
    """UPDATE by COPY into a scratch table and one UPDATE ... FROM it.

    A pipelined UPDATE per row cost the database a statement each: most of a batch of 200
    updated events or pods. The scratch has the target's column types (made from it) and is a
    temporary table kept by the session (ON COMMIT DELETE ROWS): creating and dropping one in
    every batch wrote and deleted catalog rows each time and sent every other backend a cache
    invalidation. The UPDATE takes its rows by deleting them from the scratch, so a second write
    of the table in the same transaction starts from an empty one. `IF NOT EXISTS` every time
    (a catalog lookup, no write): a transaction rolled back drops a scratch it created, and a
    pooler may hand the session's next transaction another server connection.
    """
    quote = connection.ops.quote_name
    table, pk = quote(opts.db_table), quote(opts.pk.column)
    names = [quote(column.column) for column in columns]
    listed = ", ".join(names)
    scratch = quote(scratch_name(opts.db_table, [opts.pk.column, *(c.column for c in columns)]))
    assignments = ", ".join(f"{name} = incoming.{name}" for name in names)
    with server_bound_cursor(connection) as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {scratch} ON COMMIT DELETE ROWS AS "
            f"SELECT {pk}, {listed} FROM {table} WITH NO DATA"
        )
        with cursor.copy(f"COPY {scratch} ({pk}, {listed}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([row.pk, *prepare([getattr(row, c.attname) for c in columns])])
        cursor.execute(
            f"WITH incoming AS (DELETE FROM {scratch} RETURNING *) "
            f"UPDATE {table} SET {assignments} FROM incoming WHERE {table}.{pk} = incoming.{pk}"
        )


def copy_rows(
    connection: Any,
    opts: Any,
    columns: list[Any],
    rows: list[Any],
    values: Callable[[Any], list[Any]],
    *,
    with_pks: bool,
) -> None:
    """INSERT by COPY; with `with_pks`, each row's pk is drawn from the table's sequence first.

    An INSERT per row, even pipelined, cost the database a statement each: a 150,000-pod
    initial sync spent most of its time there. COPY returns no rows, so the pks the caller
    needs are taken from the identity's sequence in one statement and copied with the rows
    (GENERATED BY DEFAULT takes them): reading them back by a unique key cost an index probe
    per row, and matching them here.
    """
    quote = connection.ops.quote_name
    names = [quote(column.column) for column in columns]
    with server_bound_cursor(connection) as cursor:
        if with_pks:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [quote(opts.db_table), opts.pk.column, len(rows)],
            )
            for row, (pk,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = pk
            names.insert(0, quote(opts.pk.column))
        with cursor.copy(f"COPY {quote(opts.db_table)} ({', '.join(names)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([row.pk, *values(row)] if with_pks else values(row))
