"""PostgreSQL connections come from a pool bounded by DASHBOARD_DATABASE_POOL_SIZE: a request
thread borrows one instead of connecting anew, and no more than the bound are ever opened."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

from dashboard.env import parse_database_url, pooled
from tests.asgi import asgi_request
from tests.dashboard.test_settings_refusals import settings_error

POSTGRES = "postgres://dash:pw@db.example.com:5432/dash?sslmode=require"


def test_postgres_connections_come_from_a_bounded_pool() -> None:
    """The pool's bound is the setting; Django's persistent connections are off beside it (it
    refuses both), and the URL's libpq options are kept."""
    database = pooled(parse_database_url(POSTGRES), size=7)
    assert database["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 7, "timeout": 30}
    assert database["OPTIONS"]["sslmode"] == "require"
    assert database["CONN_MAX_AGE"] == 0
    assert pooled(parse_database_url(POSTGRES), size=1)["OPTIONS"]["pool"]["min_size"] == 1


def test_size_zero_or_sqlite_keep_connections_per_thread() -> None:
    """0 turns the pool off (a connection per thread, kept a minute, as before); SQLite has none."""
    plain = parse_database_url(POSTGRES)
    assert pooled(parse_database_url(POSTGRES), size=0) == plain
    assert "pool" not in pooled(parse_database_url("sqlite:///var/x.sqlite3"), size=5)["OPTIONS"]


def test_a_bad_pool_size_stops_the_settings(tmp_path) -> None:
    """A negative or non-numeric size is refused at start, naming the variable."""
    for bad in ("-1", "ten"):
        error = settings_error(
            tmp_path,
            DASHBOARD_DATABASE_URL="postgres://dash:pw@127.0.0.1:5432/dash",
            DASHBOARD_DATABASE_POOL_SIZE=bad,
        )
        assert "ConfigError" in error and "DASHBOARD_DATABASE_POOL_SIZE" in error, error[-300:]
    assert settings_error(tmp_path, DASHBOARD_DATABASE_POOL_SIZE="3") == ""


@pytest.mark.django_db(transaction=True)
def test_request_threads_borrow_pooled_connections(settings) -> None:
    """120 requests reading the database, 40 at a time, each in a thread of its own: the pool
    opens at most its bound of connections (one per request before), and every one went back."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no pool; the PostgreSQL run checks")
    from console.asgi import application

    settings.ALLOWED_HOSTS = ["testserver"]
    connection.ensure_connection()
    pool = connection.pool
    assert pool is not None, "DASHBOARD_DATABASE_URL names PostgreSQL: the pool is on"
    made = pool.get_stats().get("connections_num", 0)

    async def rounds() -> list[int]:
        statuses: list[int] = []
        for _ in range(3):
            statuses += [
                status
                for status, _ in await asyncio.gather(
                    *(asgi_request(application, "GET", "/readyz") for _ in range(40))
                )
            ]
        return statuses

    assert set(asyncio.run(rounds())) == {200}
    stats = pool.get_stats()
    assert stats["requests_num"] >= 120  # every request borrowed one
    assert stats.get("connections_num", 0) - made <= pool.max_size
    # Only the test's own connection is out; the requests' are back in the pool.
    assert stats["pool_size"] - stats["pool_available"] == 1
