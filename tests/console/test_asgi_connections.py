"""Under ASGI each request runs in a thread of its own: its database connection must close when
the request ends, or every request leaves one open until PostgreSQL refuses clients."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


async def _get(app, path: str) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    messages: list[dict] = []
    done = asyncio.Event()
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        messages.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    return next(m["status"] for m in messages if m["type"] == "http.response.start")


def _sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_requests_leave_no_database_connection_open(settings) -> None:
    """120 requests that read the database, 40 at a time, through console.asgi: the sessions
    open afterwards do not grow with the requests (they did, one per request thread)."""
    if connection.vendor != "postgresql":
        pytest.skip("in-memory SQLite keeps its one connection; the PostgreSQL run checks")
    from console.asgi import application

    settings.ALLOWED_HOSTS = ["testserver"]
    before = _sessions()

    async def rounds() -> list[int]:
        statuses: list[int] = []
        for _ in range(3):
            statuses += await asyncio.gather(*(_get(application, "/readyz") for _ in range(40)))
        return statuses

    statuses = asyncio.run(rounds())
    assert set(statuses) == {200}
    assert _sessions() - before <= 5
