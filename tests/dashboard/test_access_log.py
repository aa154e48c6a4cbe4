"""The access log middleware on its own: the status it records for each way a request can end."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from dashboard.access_log import AccessLog
from dashboard.security import harden

Message = dict[str, Any]


def run(app: Any, scope: dict[str, Any]) -> list[Message]:
    """Drive `AccessLog(app)` through one connection; returns what it sent."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(AccessLog(app)(scope, receive, send))
    return sent


def http_scope(**extra: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/api/claims/what-if/",
        "query_string": b"dry=1",
        "headers": [(b"user-agent", b"kubectl/1.34"), (b"cookie", b"sessionid=secret")],
        "client": ("10.0.0.7", 51234),
        **extra,
    }


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "dashboard.access"]


def test_a_response_is_logged_with_its_fields_and_no_body_or_cookie(caplog) -> None:
    """One record: method, path, query, status, duration, client, user agent; not the body."""
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"created-body"})

    run(app, http_scope())
    [record] = access_records(caplog)
    fields = {key: getattr(record, key) for key in ("method", "path", "query", "status")}
    assert fields == {
        "method": "POST",
        "path": "/api/claims/what-if/",
        "query": "dry=1",
        "status": 201,
    }
    assert (record.client, record.user_agent, record.protocol) == (
        "10.0.0.7",
        "kubectl/1.34",
        "http",
    )
    assert record.duration_ms >= 0
    text = str(record.__dict__)
    assert "created-body" not in text and "sessionid" not in text


def test_an_application_error_before_answering_is_a_500(caplog) -> None:
    """The application raised before a response started: logged as the 500 the server sends."""
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        run(app, http_scope())
    assert [r.status for r in access_records(caplog)] == [500]


def test_no_response_is_logged_without_a_status(caplog) -> None:
    """The application returned without answering (the client left): status None."""
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        return None

    run(app, http_scope())
    [record] = access_records(caplog)
    assert record.status is None and '" - ' in record.getMessage()


@pytest.mark.parametrize(("accept", "status"), [(True, 101), (False, 403)])
def test_websockets_are_logged_when_they_close(caplog, accept: bool, status: int) -> None:
    """An accepted websocket is 101, one closed before the handshake 403."""
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        if accept:
            await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1000})

    run(app, {**http_scope(type="websocket", path="/ws/live/"), "query_string": b""})
    [record] = access_records(caplog)
    assert (record.method, record.path, record.status, record.protocol) == (
        "GET",
        "/ws/live/",
        status,
        "websocket",
    )


def test_lifespan_and_other_scopes_are_not_logged(caplog) -> None:
    """Only HTTP and websocket connections are requests."""
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        return None

    run(app, {"type": "lifespan"})
    assert access_records(caplog) == []


def test_behind_a_trusted_proxy_the_forwarded_client_is_logged(caplog, settings) -> None:
    """Inside `harden`, the access log sees the client ProxyHeaders took from the proxy."""
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    caplog.set_level(logging.INFO)

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    scope = http_scope(method="GET", headers=[(b"x-forwarded-for", b"203.0.113.9")])
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(harden(app)(scope, receive, send))
    [record] = access_records(caplog)
    assert (record.client, record.status) == ("203.0.113.9", 204)
