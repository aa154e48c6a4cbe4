"""SQLite statements run without Django rewriting their placeholders on every call.

Django's SQLite cursor turns each `%s` of a statement into `?` with a regular expression on every
execute: the multi-row INSERTs of a bulk write carry thousands of placeholders, and the rewrite
was a fortieth of importing the 5,000-node demo. `execute` runs the statement written with `?`
on the driver's cursor itself, still within Django's error translation (a duplicate key raises
Django's IntegrityError, which the object-by-object fallback of `bulk` catches). When Django logs
or wraps statements (DEBUG, a test counting queries, `connection.execute_wrapper`), the statement
goes through Django's cursor as any other, so that it is seen.
"""

from __future__ import annotations

import sqlite3
from typing import Any

# The driver's own execute, which Django's cursor class overrides with the rewrite.
_DRIVER_EXECUTE = sqlite3.Cursor.execute


def execute(cursor: Any, sql: str, qmark_sql: str, params: list[Any]) -> None:
    """Run `sql` (Django's `%s` placeholders) on `cursor`, a cursor of a SQLite connection
    from `connection.cursor()`, as `qmark_sql`: the same statement with `?` placeholders."""
    database = cursor.db
    if database.queries_logged or database.execute_wrappers:
        cursor.execute(sql, params)
        return
    database.validate_no_broken_transaction()
    with database.wrap_database_errors:
        _DRIVER_EXECUTE(cursor.cursor, qmark_sql, params)
