"""One HTTP request through an ASGI application, as a server would make it (no network)."""

from __future__ import annotations

import asyncio
from typing import Any


def http_scope(
    path: str,
    *,
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    host: bytes = b"testserver",
    client: str = "127.0.0.1",
) -> dict[str, Any]:
    """The scope of an HTTP request as a server hands it to the application."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", host), *(headers or [])],
        "client": [client, 40000],
        "server": ["127.0.0.1", 8000],
    }


async def asgi_request(
    app: Any,
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes]:
    """(status, body) of one request; the client disconnects once the response is complete."""
    scope = http_scope(path, method=method, headers=headers)
    sent = False
    done = asyncio.Event()
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    start = next(m for m in messages if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in messages if m["type"].endswith("body"))
    return start["status"], content
