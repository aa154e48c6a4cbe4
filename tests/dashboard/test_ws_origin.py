"""WebsocketOriginValidator: a handshake Origin must match scheme, host and port, not just host."""

from __future__ import annotations

from typing import Any

import pytest
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.security.websocket import AllowedHostsOriginValidator
from channels.testing import WebsocketCommunicator

from dashboard.security import WebsocketOriginValidator

# Channels closes stale database connections around each consumer, which touches the database.
pytestmark = pytest.mark.django_db(transaction=True)


class Accept(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()


def over(scheme: str, app: Any) -> Any:
    """The app as the server would call it for a ws:// or wss:// handshake."""

    async def with_scheme(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "scheme": scheme}, receive, send)

    return with_scheme


async def connects(
    origin: str | None, *, host: str = "localhost:8000", scheme: str = "ws", validator: Any = None
) -> bool:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    app = (validator or WebsocketOriginValidator)(Accept.as_asgi())
    communicator = WebsocketCommunicator(over(scheme, app), "/ws/live/", headers=headers)
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return connected


@pytest.fixture(autouse=True)
def hosts(settings) -> None:
    settings.ALLOWED_HOSTS = ["localhost", "dashboard.internal"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://dra.example.com", "https://*.example.org"]


async def test_own_origin_is_accepted() -> None:
    """Same scheme, host and port as the handshake connects; default ports may be left out."""
    assert await connects("http://localhost:8000")
    assert await connects("https://localhost", host="localhost", scheme="wss")
    assert await connects("https://localhost:443", host="localhost", scheme="wss")
    assert await connects("http://LOCALHOST:8000/")


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:8001", "localhost:8000", "ws"),  # another port on the same host
        ("https://localhost:8000", "localhost:8000", "ws"),  # https page, plain ws socket
        ("http://localhost", "localhost", "wss"),  # plain page, TLS socket
        ("http://evil.example:8000", "localhost:8000", "ws"),
        ("http://evil.example", "evil.example", "ws"),  # Host not in ALLOWED_HOSTS
        ("null", "localhost:8000", "ws"),
        (None, "localhost:8000", "ws"),
        ("http://user@localhost:8000", "localhost:8000", "ws"),
    ],
)
async def test_foreign_origins_are_refused(origin: str | None, host: str, scheme: str) -> None:
    """A different scheme or port, a foreign or missing origin, or a bad Host is refused."""
    assert not await connects(origin, host=host, scheme=scheme)


async def test_host_only_validation_would_have_let_another_port_in() -> None:
    """Channels' host-only validator accepts another port; this one does not."""
    assert await connects("http://localhost:9999", validator=AllowedHostsOriginValidator)
    assert not await connects("http://localhost:9999")


async def test_csrf_trusted_origins_are_accepted_exactly() -> None:
    """Behind a TLS proxy the public origin comes from CSRF_TRUSTED_ORIGINS, port and all."""
    assert await connects("https://dra.example.com", host="dashboard.internal")
    assert await connects("https://a.example.org", host="dashboard.internal")
    assert not await connects("http://dra.example.com", host="dashboard.internal")
    assert not await connects("https://dra.example.com:8443", host="dashboard.internal")
    assert not await connects("https://example.org.evil.com", host="dashboard.internal")
    assert not await connects("https://dra.example.com", host="unlisted.internal")
