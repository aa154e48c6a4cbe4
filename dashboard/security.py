"""Web-layer guards: proxy headers from trusted proxies only, a request body cap, websocket origins,
and the Content-Security-Policy header.

`harden(app)` wraps the whole ASGI application (HTTP and websockets); `WebsocketOriginValidator`
replaces Channels' AllowedHostsOriginValidator around the websocket router; the CSP middleware is
ordinary Django middleware listed in settings.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.utils.deprecation import MiddlewareMixin

from dashboard.access_log import AccessLog

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Headers a client could forge to pose as another address or as HTTPS; only a trusted proxy's
# copies reach the application.
FORWARDED_HEADERS = frozenset(
    {
        b"forwarded",
        b"x-forwarded-for",
        b"x-forwarded-proto",
        b"x-forwarded-port",
        b"x-forwarded-host",
        b"x-real-ip",
    }
)


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """IP addresses and CIDR blocks (`10.0.0.0/8`, `127.0.0.1`); ValueError on anything else."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)


@lru_cache(maxsize=8)
def _trusted(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values)


def _in(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [value for key, value in scope.get("headers", []) if key == name]
    return b",".join(values).decode("latin-1") if values else None


class ProxyHeaders:
    """Take the client address and scheme from X-Forwarded-For/-Proto, from trusted proxies only.

    The web server's own proxy-header handling stays off; the one rule is this one. A peer in
    settings.TRUSTED_PROXIES may set
    the client (the right-most X-Forwarded-For address that is not itself a trusted proxy) and the
    scheme; from any other peer every forwarding header is dropped, so neither Django
    (SECURE_PROXY_SSL_HEADER) nor the login throttle ever sees a forged one.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in {"http", "websocket"}:
            scope = self.rewrite(scope, _trusted(tuple(settings.TRUSTED_PROXIES)))
        await self.app(scope, receive, send)

    @staticmethod
    def rewrite(scope: Scope, trusted: tuple[Network, ...]) -> Scope:
        client = scope.get("client")
        peer = str(client[0]) if client else ""
        if not (trusted and peer and _in(peer, trusted)):
            headers = [(k, v) for k, v in scope.get("headers", []) if k not in FORWARDED_HEADERS]
            return {**scope, "headers": headers}
        scope = dict(scope)
        forwarded_for = _header(scope, b"x-forwarded-for")
        if forwarded_for:
            hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
            # Walk back from the nearest hop: the first address no trusted proxy owns is the client.
            untrusted = [hop for hop in reversed(hops) if not _in(hop, trusted)]
            chosen = untrusted[0] if untrusted else hops[0]
            try:
                scope["client"] = [str(ipaddress.ip_address(chosen.strip("[]"))), 0]
            except ValueError:
                logger.warning("ignoring malformed X-Forwarded-For %r from %s", chosen, peer)
        proto = _header(scope, b"x-forwarded-proto")
        if proto:
            value = proto.split(",")[-1].strip().lower()
            if value in {"http", "https"}:
                secure = value == "https"
                if scope["type"] == "websocket":
                    scope["scheme"] = "wss" if secure else "ws"
                else:
                    scope["scheme"] = value
        return scope


class RequestTooLarge(Exception):
    """The request body went past settings.MAX_REQUEST_BYTES while it was being read."""


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """Refuse HTTP bodies over settings.MAX_REQUEST_BYTES with 413 before Django buffers them.

    A Content-Length over the cap is refused without reading a byte; a body without one (chunked)
    or longer than it said is counted while the application reads it and cut off at the cap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = int(settings.MAX_REQUEST_BYTES)
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                await _plain(send, 400, "Malformed Content-Length.\n")
                return
            if length > limit:
                await _plain(send, 413, f"Request body over the {limit}-byte limit.\n")
                return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestTooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except RequestTooLarge:
            if not started:
                await _plain(send, 413, f"Request body over the {limit}-byte limit.\n")


def harden(app: ASGIApp) -> ASGIApp:
    """The ASGI application behind trusted-proxy handling, the access log and the body cap.

    The access log sits inside ProxyHeaders (it logs the forwarded client) and outside the cap
    (a refused body's 413 is logged too).
    """
    return ProxyHeaders(AccessLog(BodySizeLimit(app)))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_key(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) origin, the default port filled in; None if not one."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in {"", "/"} or parts.query or parts.fragment or parts.username:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def _allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]  # what Django's HttpRequest allows then
    return hosts


def origin_allowed(scope: Scope) -> bool:
    """A websocket handshake's Origin is this site's own origin, or one in CSRF_TRUSTED_ORIGINS.

    Own origin: scheme (ws→http, wss→https), host and port of the Host header, which must itself
    be an allowed host. Like Django's CSRF check, a missing or foreign origin is refused.
    """
    origins = [v for k, v in scope.get("headers", []) if k == b"origin"]
    hosts = [v for k, v in scope.get("headers", []) if k == b"host"]
    if len(origins) != 1 or len(hosts) != 1:
        return False
    origin = _origin_key(origins[0].decode("latin-1"))
    host = hosts[0].decode("latin-1").strip().lower()
    domain, _ = split_domain_port(host)
    if origin is None or not domain or not validate_host(domain, _allowed_hosts()):
        return False
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    if origin == _origin_key(f"{scheme}://{host}"):
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in trusted
        key = _origin_key(trusted.replace("://*.", "://", 1) if wildcard else trusted)
        if key is None or key[0] != origin[0] or key[2] != origin[2]:
            continue
        if origin[1] == key[1] or (wildcard and origin[1].endswith("." + key[1])):
            return True
    return False


class WebsocketOriginValidator:
    """Drop-in for AllowedHostsOriginValidator that compares scheme and port too, not host only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.denier = WebsocketDenier.as_asgi()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            await self.denier(scope, receive, send)
            return
        await self.app(scope, receive, send)


def content_security_policy(request: HttpRequest) -> str:
    """The policy for one response: only this origin's scripts, no plugins, no framing.

    Styles allow 'unsafe-inline': templates size bars with style attributes and htmx adds its
    indicator <style>; script, the real injection risk, allows no inline code and no eval.
    """
    connect = ["'self'"]
    # Sign-out posts here and is sent on to the OpenID provider's end_session_endpoint: form
    # submissions' redirects are held to form-action too.
    form_action = ["'self'", *(settings.OIDC.origins if settings.OIDC else ())]
    # Older browsers do not count ws(s):// of the page's own host as 'self'.
    with contextlib.suppress(DisallowedHost):
        connect.append(f"{'wss' if request.is_secure() else 'ws'}://{request.get_host()}")
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src {' '.join(connect)}",
            "object-src 'none'",
            "base-uri 'none'",
            f"form-action {' '.join(form_action)}",
            "frame-ancestors 'none'",
        ]
    )


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Adds Content-Security-Policy to every response that does not set its own."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(request)
        return response
