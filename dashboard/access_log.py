"""The web server's access log: one record per HTTP request or websocket, logged when it ends.

uvicorn's own access log is off (the web server's start sets access_log=False): it logged the
request line whole, query string and all, and knew neither the duration nor the user agent.
`AccessLog` wraps the ASGI application inside the trusted-proxy handling
(`dashboard.security.harden`), so the client is the forwarded one when a trusted proxy sent the
request. Each record, logger `dashboard.access` at INFO, carries these fields (JSON with
DASHBOARD_LOG_JSON=1, in the message otherwise):

    method, path, query, status, duration_ms, client, user_agent, protocol ("http"/"websocket")

Never a request body, a cookie or a header other than the user agent. Values of parameters
that look like credentials (`token`, `code`, `password`, `secret`, ...) are replaced by
REDACTED, and so are URL segments the URLconf names so (`/accounts/reset/<uidb64>/<token>/`).
`state` is OIDC's nonce only in an authorization response (beside `code` or `error`); elsewhere
it is the claim and device lists' filter (`?state=pending`) and is kept.
`status` is None when no response started (the client went away first); an application that
raised before answering is logged as the 500 uvicorn then sends.

Django's own request lines ("Not Found: /accounts/reset/MQ/<token>/") get the same treatment of
their path through `RedactPathFilter`, a filter of settings.LOGGING's handler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from django.urls import Resolver404, resolve

if TYPE_CHECKING:  # dashboard.security wraps the application in this middleware
    from dashboard.security import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("dashboard.access")

REDACTED = "REDACTED"
# Parameter (and URL keyword) names whose value is a credential: OAuth/OIDC's `code`, `state` and
# tokens, share and reset tokens, passwords, signatures.
SECRET_NAMES = frozenset({"code", "key", "sig"})
# Secret only in an OAuth/OIDC authorization response, which carries `code` or `error`.
RESPONSE_NAMES = frozenset({"state", "session_state"})
SECRET_PARTS = ("token", "password", "passwd", "secret", "credential", "signature", "apikey")
# Bounds a line whatever a client sends (uvicorn accepts request lines far longer).
MAX_PATH = 1024
MAX_QUERY = 1024
MAX_USER_AGENT = 256


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or URL keyword of this name holds a credential."""
    lowered = name.lower()
    return lowered in SECRET_NAMES or any(part in lowered for part in SECRET_PARTS)


def redact_query(query: str) -> str:
    """The query string with the values of secret-looking parameters replaced by REDACTED."""
    split = [(pair, unquote_plus(pair.partition("=")[0]).lower()) for pair in query.split("&")]
    authorization_response = any(name in {"code", "error"} for _, name in split)
    pairs = []
    for pair, name in split:
        secret = is_secret_name(name) or (authorization_response and name in RESPONSE_NAMES)
        if secret and "=" in pair:
            pairs.append(f"{pair.partition('=')[0]}={REDACTED}")
        else:
            pairs.append(pair)
    return _cut("&".join(pairs), MAX_QUERY)


def redact_path(path: str) -> str:
    """The path with the segments the URLconf captures under a secret-looking name replaced."""
    try:
        match = resolve(path)
    except (Resolver404, ValueError):
        return _cut(path, MAX_PATH)
    secrets = {str(value) for name, value in match.kwargs.items() if is_secret_name(name)}
    if secrets:
        path = "/".join(REDACTED if segment in secrets else segment for segment in path.split("/"))
    return _cut(path, MAX_PATH)


class RedactPathFilter(logging.Filter):
    """Redact the path in Django's request lines, which log `request.path` with the request."""

    def filter(self, record: logging.LogRecord) -> bool:
        path = getattr(record.__dict__.get("request"), "path", None)
        if isinstance(path, str) and isinstance(record.args, tuple) and path in record.args:
            redacted = redact_path(path)
            record.args = tuple(redacted if arg == path else arg for arg in record.args)
        return True


class AccessLog:
    """ASGI middleware logging each HTTP request and websocket once it has ended."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in {"http", "websocket"}:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int | None] = [None]

        async def noting_send(message: Message) -> None:
            kind = message["type"]
            if kind in {"http.response.start", "websocket.http.response.start"}:
                status[0] = int(message["status"])
            elif kind == "websocket.accept":
                status[0] = 101
            elif kind == "websocket.close" and status[0] is None:
                status[0] = 403  # closed before the handshake: uvicorn answers 403
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        except Exception:
            if status[0] is None:
                status[0] = 500
            raise
        finally:
            _log(scope, status[0], (time.perf_counter() - started) * 1000)


def _log(scope: Scope, status: int | None, duration_ms: float) -> None:
    websocket = scope["type"] == "websocket"
    method = "GET" if websocket else str(scope.get("method", ""))
    path = redact_path(str(scope.get("path", "")))
    query = redact_query(bytes(scope.get("query_string", b"")).decode("latin-1"))
    client = scope.get("client")
    address = str(client[0]) if client else ""
    user_agent = _cut(_header(scope, b"user-agent"), MAX_USER_AGENT)
    fields: dict[str, Any] = {
        "method": method,
        "path": path,
        "query": query,
        "status": status,
        "duration_ms": round(duration_ms, 1),
        "client": address,
        "user_agent": user_agent,
        "protocol": "websocket" if websocket else "http",
    }
    target = f"{path}?{query}" if query else path
    log.info(
        '%s "%s %s" %s %.1fms "%s"',
        address or "-",
        method,
        target,
        "-" if status is None else status,
        duration_ms,
        user_agent,
        extra=fields,
    )


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
