"""Per-table versions that move in commit order: what every kept value is keyed by.

A summary of a table's rows (row count, newest `synced_at`, highest pk) can miss a write: a
transaction that stamped its rows before another's and commits after it changes neither the
count, nor the pk, nor the newest stamp. A reader who took the summary between the two commits
then keeps what it computed until some other write. A version bumped by every writing
transaction, under the version row's lock, at commit, cannot: the lock orders the bumps as the
commits, so a transaction that commits after a reader read version v leaves v + 1 or more.

Database triggers bump it, so that every path that writes (the sync's bulk writers and COPY,
deletes, claims' template linking, the snapshot import, demo seeding, the admin and tests'
saves, raw SQL) is counted without anyone having to remember to.

- PostgreSQL: a statement-level trigger on each watched table notes the table in a
  transaction-local setting and, the first time in a transaction, inserts one row into an
  unlogged queue table; a deferred constraint trigger on that row bumps every noted table, in
  name order, at commit. Version rows are so locked only while a transaction commits (writers
  of one table are not serialised while they write, writers of different tables never), and in
  one order (no deadlock among them). A rolled-back savepoint takes its notes with it.
- SQLite: only row-level triggers exist; each written row bumps its table's version. Writers
  hold the database's lock until they commit, so the order is the commit order already.

A bump sets the version to the clock (microseconds) when that is more than one up, so that a
version is not reached twice with other rows: not after a rolled-back transaction (a test's), a
truncated table or a restored backup, and not by another database sharing the Redis cache the
what-if's answers are kept in under the versions (two test workers, two installations).

`deletes` counts the transactions (PostgreSQL) or rows (SQLite) that deleted from the table:
a reader following changes by `synced_at` (`claims.devices.classes.written_since`) cannot see
a deleted row and reads the whole table again when it moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.db import connection, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

__all__ = ["TableState", "is_private", "read_versions", "unwatch_tables", "watch_tables"]

VERSIONS = "inventory_tableversion"
PENDING = "inventory_tableversion_pending"

_PG_FUNCTIONS = f"""
CREATE UNLOGGED TABLE IF NOT EXISTS {PENDING} (xid bigint PRIMARY KEY);

CREATE OR REPLACE FUNCTION inventory_table_written() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  written text := coalesce(current_setting('inventory.written', true), '');
  deleted text := coalesce(current_setting('inventory.deleted', true), '');
BEGIN
  IF TG_OP IN ('DELETE', 'TRUNCATE') AND position(',' || TG_TABLE_NAME || ',' IN deleted) = 0
  THEN
    PERFORM set_config('inventory.deleted', deleted || ',' || TG_TABLE_NAME || ',', true);
  END IF;
  -- Its statements writing the table so far, and the last one's time: what a reader in this
  -- transaction keys its values by and follows changes from.
  PERFORM set_config('inventory.n_' || TG_TABLE_NAME, (coalesce(nullif(
    current_setting('inventory.n_' || TG_TABLE_NAME, true), ''), '0')::bigint + 1)::text, true);
  PERFORM set_config('inventory.t_' || TG_TABLE_NAME, clock_timestamp()::text, true);
  IF position(',' || TG_TABLE_NAME || ',' IN written) = 0 THEN
    IF written = '' THEN
      INSERT INTO {PENDING} (xid) VALUES (txid_current()) ON CONFLICT DO NOTHING;
    END IF;
    PERFORM set_config('inventory.written', written || ',' || TG_TABLE_NAME || ',', true);
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION inventory_tables_committing() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  deleted text := coalesce(current_setting('inventory.deleted', true), '');
BEGIN
  INSERT INTO {VERSIONS} AS v (name, version, deletes, written_at)
  SELECT t.name, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
         CASE WHEN position(',' || t.name || ',' IN deleted) > 0 THEN 1 ELSE 0 END, now()
  FROM unnest(string_to_array(current_setting('inventory.written', true), ',')) AS t(name)
  WHERE t.name <> ''
  ORDER BY t.name
  ON CONFLICT (name) DO UPDATE SET version = greatest(v.version + 1, excluded.version),
    deletes = v.deletes + excluded.deletes, written_at = excluded.written_at;
  DELETE FROM {PENDING} WHERE xid = NEW.xid;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS inventory_tables_committing ON {PENDING};
CREATE CONSTRAINT TRIGGER inventory_tables_committing AFTER INSERT ON {PENDING}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION inventory_tables_committing();
"""

_SQLITE_BUMP = """
CREATE TRIGGER IF NOT EXISTS "{trigger}" AFTER {event} ON "{table}" FOR EACH ROW BEGIN
  INSERT INTO {versions} (name, version, deletes, written_at)
  VALUES ('{table}', {clock}, {deletes}, strftime('%Y-%m-%d %H:%M:%f', 'now'))
  ON CONFLICT (name) DO UPDATE SET version = max(version + 1, excluded.version),
    deletes = deletes + excluded.deletes, written_at = excluded.written_at;
END
"""

_SQLITE_EVENTS = (("INSERT", 0), ("UPDATE", 0), ("DELETE", 1))
# Microseconds since the epoch (SQLite's clock has milliseconds; the rest at random).
_SQLITE_CLOCK = (
    "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) * 1000 + abs(random()) % 1000)"
)


class TableState(NamedTuple):
    """One table's version as read: equal states mean no transaction committed a write between
    the two reads. `written_at`: when the last one began or committed (None: none yet).

    On PostgreSQL a transaction's own writes are counted at its commit: a reader inside it (a
    test, a request that wrote) sees a state of its own for each table it wrote, "v+txid.n"
    (n: its statements writing the table so far), which no other transaction ever reads."""

    version: str
    deletes: str
    written_at: datetime | None


def _checked(table: str) -> str:
    # Names come from migrations, but end up in SQL text: only plain identifiers.
    if not table.replace("_", "").isalnum() or not table.isascii():
        raise ValueError(f"table name {table!r} is not a plain identifier")
    return table


def watch_tables(schema_editor: Any, tables: Mapping[str, Sequence[str]]) -> None:
    """Install the triggers that bump the versions of `tables` (a migration's RunPython): table
    -> the columns the dashboard writes itself (a claim's diagnosis), whose updates alone do not
    count. Updates count by the table's columns as they are now: a migration adding a column
    calls this again (`tests/inventory/test_versions.py` checks every column counts)."""
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        raise NotImplementedError(f"table versions on {vendor}")
    unwatch_tables(schema_editor, list(tables))
    if vendor == "postgresql":
        schema_editor.execute(_PG_FUNCTIONS)
    for table, ignored in tables.items():
        table = _checked(table)
        with schema_editor.connection.cursor() as cursor:
            description = schema_editor.connection.introspection.get_table_description(
                cursor, table
            )
        columns = ", ".join(
            schema_editor.quote_name(column.name)
            for column in description
            if column.name not in ignored
        )
        if vendor == "postgresql":
            for trigger, events in (
                ("inventory_table_written", "INSERT OR DELETE OR TRUNCATE"),
                ("inventory_table_updated", f"UPDATE OF {columns}"),
            ):
                schema_editor.execute(
                    f'CREATE TRIGGER {trigger} AFTER {events} ON "{table}" FOR EACH STATEMENT '
                    f"EXECUTE FUNCTION inventory_table_written()"
                )
            continue
        for event, deletes in _SQLITE_EVENTS:
            schema_editor.execute(
                _SQLITE_BUMP.format(
                    trigger=f"inventory_written_{table}_{event.lower()}",
                    event=f"UPDATE OF {columns}" if event == "UPDATE" else event,
                    table=table,
                    versions=VERSIONS,
                    deletes=deletes,
                    clock=_SQLITE_CLOCK,
                )
            )
    # Rows for tables that hold rows already: a reader sees version 1, not a missing row.
    schema_editor.execute(
        f"INSERT INTO {VERSIONS} (name, version, deletes, written_at) VALUES "
        + ", ".join("(%s, 1, 0, NULL)" for _ in tables)
        + " ON CONFLICT (name) DO NOTHING",
        list(tables),
    )


def unwatch_tables(schema_editor: Any, tables: Iterable[str]) -> None:
    """Remove the triggers `watch_tables` installed (a migration's reverse)."""
    vendor = schema_editor.connection.vendor
    for table in map(_checked, tables):
        if vendor == "postgresql":
            for trigger in ("inventory_table_written", "inventory_table_updated"):
                schema_editor.execute(f'DROP TRIGGER IF EXISTS {trigger} ON "{table}"')
        else:
            for event, _ in _SQLITE_EVENTS:
                trigger = f"inventory_written_{table}_{event.lower()}"
                schema_editor.execute(f'DROP TRIGGER IF EXISTS "{trigger}"')


def read_versions(model_classes: Sequence[type[models.Model]]) -> list[TableState]:
    """The state of each model's table, in one statement (a table never written: version 0).
    Read it before the rows a value is computed from: a write committed in between then shows
    as a newer version the next time, never the other way round."""
    tables = [_checked(model._meta.db_table) for model in model_classes]
    names = ", ".join(["%s"] * len(tables))
    if connection.vendor == "postgresql":
        local = ", ".join(
            ["txid_current_if_assigned()", "current_setting('inventory.deleted', true)"]
            + [
                f"current_setting('inventory.n_{table}', true), "
                f"nullif(current_setting('inventory.t_{table}', true), '')::timestamptz"
                for table in tables
            ]
        )
    else:
        local = ", ".join(["NULL"] * (2 + 2 * len(tables)))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT v.name, v.version, v.deletes, v.written_at, s.* "  # noqa: S608
            f"FROM (SELECT {local}) AS s LEFT JOIN {VERSIONS} AS v ON v.name IN ({names})",
            tables,
        )
        rows = cursor.fetchall()
    found = {row[0]: row[1:4] for row in rows if row[0] is not None}
    txid, deleted = rows[0][4:6]
    out = []
    for index, table in enumerate(tables):
        version, deletes, when = found.get(table, (0, 0, None))
        statements, written_last = rows[0][6 + 2 * index : 8 + 2 * index]
        if not statements:
            out.append(TableState(str(version), str(deletes), _aware(when)))
            continue
        own = f"+{txid}.{statements}"
        removed = f",{table}," in (deleted or "")
        # Its own last write statement's time: rows it writes later carry later stamps.
        out.append(
            TableState(f"{version}{own}", f"{deletes}{own if removed else ''}", written_last)
        )
    return out


def is_private(value: Any) -> bool:
    """Whether `value` (a state's version, or a fingerprint made of states) holds a state of a
    transaction's own uncommitted writes ("v+txid.n"), which nothing may be stored under."""
    if isinstance(value, str):
        return "+" in value
    return isinstance(value, tuple | list) and any(is_private(item) for item in value)


def _aware(value: Any) -> datetime | None:
    when = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(when, datetime):
        return None
    # SQLite's text is UTC without an offset.
    return timezone.make_aware(when, UTC) if timezone.is_naive(when) else when
