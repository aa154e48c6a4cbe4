"""Web-layer guards through the real ASGI app and Django client: the body cap, proxy headers from
trusted proxies only, the Content-Security-Policy header, password reset only with mail."""

from __future__ import annotations

import asyncio
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client

from console.asgi import application
from dashboard.env import ConfigError, env_networks, env_str
from dashboard.security import ProxyHeaders, parse_networks
from tests.asgi import http_scope as asgi_scope

MIB = 1024 * 1024
TEMPLATES = Path(settings.BASE_DIR) / "templates"


def http_scope(
    path: str,
    *,
    method: str = "POST",
    headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
    client: str = "127.0.0.1",
) -> dict[str, Any]:
    return asgi_scope(path, method=method, headers=list(headers), host=b"localhost", client=client)


class Body:
    """An ASGI receive() streaming `total` bytes in 1 MiB chunks and counting what was taken."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.read = 0
        self.finished = False
        self.chunk = b"x" * MIB  # one buffer reused: memory measured is the app's, not ours

    async def __call__(self) -> dict[str, Any]:
        if self.finished:
            await asyncio.Future()  # nothing more: wait like a client that stays connected
        size = min(MIB, self.total - self.read)
        self.finished = self.read + size >= self.total
        self.read += size
        body = self.chunk if size == MIB else self.chunk[:size]
        return {"type": "http.request", "body": body, "more_body": self.read < self.total}


async def call(scope: dict[str, Any], body: Body) -> tuple[int, dict[bytes, bytes], bytes]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await asyncio.wait_for(application(scope, body, send), timeout=30)
    start = next(m for m in messages if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], {k.lower(): v for k, v in start["headers"]}, content


@pytest.mark.django_db(transaction=True)
async def test_a_declared_100_mb_body_is_refused_unread() -> None:
    """Content-Length of 100 MB: 413 at once, not one body byte read."""
    body = Body(100 * MIB)
    scope = http_scope("/api/claims/what-if/", headers=[(b"content-length", b"104857600")])
    status, _, content = await call(scope, body)
    assert status == 413 and b"limit" in content
    assert body.read == 0


@pytest.mark.django_db(transaction=True)
async def test_a_streamed_100_mb_body_is_cut_off_at_the_cap() -> None:
    """Without Content-Length the body is counted: 413 after the cap, memory stays small."""
    body = Body(100 * MIB)
    tracemalloc.start()
    try:
        status, _, _ = await call(http_scope("/api/claims/what-if/"), body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 413
    assert settings.MAX_REQUEST_BYTES < body.read <= settings.MAX_REQUEST_BYTES + MIB
    assert peak < 16 * MIB


@pytest.mark.django_db(transaction=True)
async def test_a_body_longer_than_declared_is_cut_off_too(settings) -> None:
    """A small Content-Length followed by a long body still stops at the cap."""
    settings.MAX_REQUEST_BYTES = 2 * MIB
    body = Body(50 * MIB)
    scope = http_scope("/api/claims/what-if/", headers=[(b"content-length", b"100")])
    status, _, _ = await call(scope, body)
    assert status == 413 and body.read <= 3 * MIB


@pytest.mark.django_db(transaction=True)
async def test_bodies_under_the_cap_reach_django() -> None:
    """A small POST goes through to Django (here refused by CSRF, 403, not by the cap)."""
    body = Body(1000)
    scope = http_scope("/accounts/login/", headers=[(b"content-length", b"1000")])
    status, _, _ = await call(scope, body)
    assert status == 403 and body.read == 1000
    bad = http_scope("/accounts/login/", headers=[(b"content-length", b"-5")])
    assert (await call(bad, Body(0)))[0] == 400


def test_max_request_bytes_default_fits_what_if_and_imports() -> None:
    """The default cap is 10 MiB and Django's form-data cap follows it."""
    assert settings.MAX_REQUEST_BYTES == 10 * MIB
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == settings.MAX_REQUEST_BYTES


def forwarded(peer: str, trusted: list[str], **headers: str) -> dict[str, Any]:
    scope = http_scope("/", method="GET", client=peer)
    scope["headers"] += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return ProxyHeaders.rewrite(scope, parse_networks(trusted))


def test_forwarding_headers_from_strangers_are_dropped() -> None:
    """A peer outside TRUSTED_PROXIES keeps its own address and loses every forwarding header."""
    scope = forwarded(
        "198.51.100.4", ["10.0.0.0/8"], x_forwarded_for="1.2.3.4", x_forwarded_proto="https"
    )
    assert scope["client"][0] == "198.51.100.4" and scope["scheme"] == "http"
    assert {k for k, _ in scope["headers"]} == {b"host"}
    untrusting = forwarded("127.0.0.1", [], x_forwarded_for="1.2.3.4", forwarded="for=1.2.3.4")
    assert untrusting["client"][0] == "127.0.0.1"
    assert {k for k, _ in untrusting["headers"]} == {b"host"}


def test_a_trusted_proxy_sets_client_and_scheme() -> None:
    """From a trusted proxy the nearest untrusted X-Forwarded-For hop is the client."""
    scope = forwarded(
        "10.1.2.3",
        ["10.0.0.0/8"],
        x_forwarded_for="6.6.6.6, 203.0.113.9, 10.9.9.9",
        x_forwarded_proto="https",
    )
    assert scope["client"][0] == "203.0.113.9" and scope["scheme"] == "https"
    socket = http_scope("/ws/live/", method="GET", client="10.1.2.3")
    socket.update(type="websocket", scheme="ws")
    socket["headers"].append((b"x-forwarded-proto", b"https"))
    assert ProxyHeaders.rewrite(socket, parse_networks(["10.0.0.0/8"]))["scheme"] == "wss"


async def csp_of(peer: str) -> str:
    scope = http_scope("/accounts/login/", method="GET", client=peer)
    scope["headers"].append((b"x-forwarded-proto", b"https"))
    status, headers, _ = await call(scope, Body(0))
    assert status == 200
    return headers[b"content-security-policy"].decode()


@pytest.mark.django_db(transaction=True)
async def test_django_sees_https_only_from_a_trusted_proxy(settings) -> None:
    """With SECURE_PROXY_SSL_HEADER on, a stranger's X-Forwarded-Proto never makes it HTTPS."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert "ws://localhost" in await csp_of("198.51.100.4")
    assert "wss://localhost" in await csp_of("10.0.0.2")


def test_trusted_proxies_and_redis_url_settings(monkeypatch, tmp_path) -> None:
    """TRUSTED_PROXIES must be addresses or blocks; REDIS_URL can come from a file."""
    monkeypatch.setenv("DASHBOARD_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7")
    assert env_networks("TRUSTED_PROXIES") == ["10.0.0.0/8", "192.0.2.7"]
    monkeypatch.setenv("DASHBOARD_TRUSTED_PROXIES", "ingress-nginx")
    with pytest.raises(ConfigError, match="DASHBOARD_TRUSTED_PROXIES"):
        env_networks("TRUSTED_PROXIES")
    secret = tmp_path / "redis-url"
    secret.write_text("redis://:s3cret@redis:6379/0\n")
    monkeypatch.setenv("DASHBOARD_REDIS_URL", "redis://redis:6379/0")
    monkeypatch.setenv("DASHBOARD_REDIS_URL_FILE", str(secret))
    assert env_str("REDIS_URL") == "redis://:s3cret@redis:6379/0"


def policy(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in header.split("; ")}


def test_pages_carry_a_strict_script_policy(db, viewer_user) -> None:
    """Login, overview, API docs and JSON answers all send a CSP without inline script or eval."""
    anonymous = Client()
    signed_in = Client()
    signed_in.force_login(viewer_user)
    responses = [
        anonymous.get("/accounts/login/"),
        signed_in.get("/"),
        signed_in.get("/api/docs/"),
        signed_in.get("/api/inventory/pools/"),
    ]
    for response in responses:
        assert response.status_code == 200, response.request["PATH_INFO"]
        directives = policy(response)
        assert directives["script-src"] == ["'self'"]
        assert directives["default-src"] == ["'self'"]
        assert directives["object-src"] == ["'none'"]
        assert directives["frame-ancestors"] == ["'none'"]
        assert "ws://testserver" in directives["connect-src"]
        assert not any("http" in source for values in directives.values() for source in values)


def test_pages_use_no_inline_script() -> None:
    """Templates load scripts by src only and use no on* handlers or javascript: URLs."""
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>\s*\S", re.IGNORECASE)
    handler = re.compile(r"\son[a-z]+\s*=|javascript:|hx-on", re.IGNORECASE)
    templates = list(TEMPLATES.rglob("*.html"))
    assert templates
    for path in templates:
        text = path.read_text()
        assert not inline_script.search(text), path
        assert not handler.search(text), path


def test_the_api_docs_page_has_no_inline_script(db, viewer_user) -> None:
    """Swagger UI loads its initialiser from a URL, so script-src 'self' lets it run."""
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/api/docs/").content.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.DOTALL)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)


@pytest.fixture
def reset_user(db) -> Iterator[Any]:
    from django.contrib.auth.models import User

    yield User.objects.create_user("resetme", "resetme@example.com", "old-password-123")


def test_password_reset_is_404_without_mail(reset_user) -> None:
    """Without DASHBOARD_EMAIL_HOST every password-reset URL answers 404 and sends nothing."""
    assert settings.PASSWORD_RESET_ENABLED is False
    client = Client()
    for path in (
        "/accounts/password_reset/",
        "/accounts/password_reset/done/",
        "/accounts/reset/MQ/set-password/",
        "/accounts/reset/done/",
    ):
        assert client.get(path).status_code == 404, path
    response = client.post("/accounts/password_reset/", {"email": "resetme@example.com"})
    assert response.status_code == 404
    assert mail.outbox == []


def test_password_reset_works_once_mail_is_configured(reset_user, settings) -> None:
    """With mail configured the reset form is served and sends the reset link."""
    settings.PASSWORD_RESET_ENABLED = True
    client = Client()
    assert client.get("/accounts/password_reset/").status_code == 200
    response = client.post("/accounts/password_reset/", {"email": "resetme@example.com"})
    assert response.status_code == 302
    assert [m.to for m in mail.outbox] == [["resetme@example.com"]]
