"""What a user or a cluster tenant sends cannot stall, exhaust or take over the dashboard.

Each attack goes through the real ASGI application (`console.asgi.application`, with its body
cap, proxy-header and origin guards) or, for snapshot import, the import function itself, and
must end in a 400 (or 413, or a refused socket) or a bounded answer. Bounded is counted, never
timed: Python allocations during the request stay under `MEMORY_BOUND` (tracemalloc peak), a
refused input starts no search, a body over the cap is not read past it, and a what-if search
stops at its budget on a clock that ticks once per reading (`tests.clock`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tracemalloc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.authtoken.models import Token

from claims.whatif import simulation
from console.asgi import application
from dralib.allocator import Allocator, budget
from inventory.snapshot import SnapshotError, import_texts
from tests import clock
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_budget import exponential_claim, hostile_cluster
from tests.dralib.allocator.test_cel_fidelity import regex_engines

MEMORY_BOUND = 64 * 1024 * 1024
MIB = 1024 * 1024
WHATIF = "/api/claims/what-if/"


@dataclass
class Answer:
    status: int
    body: bytes
    peak: int  # tracemalloc peak during the request
    received: int  # request body bytes the application took from the client
    searches: int  # allocator searches the request started

    def json(self) -> Any:
        return json.loads(self.body)


# Allocator searches (Allocator.allocate calls) started during the test.
SEARCHES: list[object] = []


@pytest.fixture(autouse=True)
def counted_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    SEARCHES.clear()
    allocate = Allocator.allocate

    def counted(self: Allocator, *args: Any, **kwargs: Any) -> Any:
        SEARCHES.append(args)
        return allocate(self, *args, **kwargs)

    monkeypatch.setattr(Allocator, "allocate", counted)


async def _call(
    method: str, path: str, *, parts: Iterable[bytes], headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes, int]:
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "scheme": "http",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    pending = iter(parts)
    following = next(pending, None)
    received = 0
    status = 0
    out = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal following, received
        if following is not None:
            piece, following = following, next(pending, None)
            received += len(piece)
            return {"type": "http.request", "body": piece, "more_body": following is not None}
        # The client stays connected: Django cancels a request whose client went away.
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            out.extend(message.get("body", b""))

    await application(scope, receive, send)
    return status, bytes(out), received


def request(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    token: str = "",
    content_type: bytes = b"application/json",
    stream: Iterable[bytes] | None = None,
    declared: int | None = None,
) -> Answer:
    """One request through the ASGI app: what it answered, allocated, read and searched.

    `body` is sent in one message with its Content-Length; `stream` in the messages it yields,
    with the Content-Length `declared` or none (chunked).
    """
    all_headers = list(headers or [])
    if body or stream is not None:
        all_headers.append((b"content-type", content_type))
    length = len(body) if stream is None and body else declared
    if length is not None:
        all_headers.append((b"content-length", str(length).encode()))
    if token:
        all_headers.append((b"authorization", f"Token {token}".encode()))
    searches_before = len(SEARCHES)
    tracemalloc.start()
    # As Django's test client does: the request must not close the test's database connection
    # (the view runs in this thread, inside the test's transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        status, out, received = async_to_sync(_call)(
            method, path, parts=[body] if stream is None else stream, headers=all_headers
        )
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return Answer(
        status=status,
        body=out,
        peak=peak,
        received=received,
        searches=len(SEARCHES) - searches_before,
    )


@pytest.fixture
def token(db) -> str:
    user = User.objects.create_user("tenant", password="tenant-password-long-enough")
    return Token.objects.create(user=user).key


@pytest.fixture
def cluster(db) -> Iterator[None]:
    load_objects(hostile_cluster(nodes=3))
    yield


def post_yaml(text: str | bytes, *, token: str, **options: Any) -> Answer:
    payload = {"yaml": text if isinstance(text, str) else text.decode(), **options}
    return request("POST", WHATIF, body=json.dumps(payload).encode(), token=token)


def assert_refused(answer: Answer, *, status: int = 400) -> None:
    """Refused with `status` before any search, in bounded memory."""
    assert answer.status == status, answer.body[:500]
    assert answer.searches == 0
    assert answer.peak < MEMORY_BOUND


ALIAS_BOMB = "\n".join(
    ["a: &a ['x','x','x','x','x','x','x','x','x']"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}" + f",*{chr(97 + i)}" * 8 + "]"
       for i in range(8)]
)  # fmt: skip


def test_yaml_alias_bomb_is_refused_before_it_expands(cluster, token) -> None:
    """A 600-byte billion-laughs what-if body is a 400 naming anchors, never expanded."""
    assert len(ALIAS_BOMB) < 700
    answer = post_yaml(ALIAS_BOMB, token=token)
    assert_refused(answer)
    assert answer.json()["field"] == "yaml" and "anchor" in answer.json()["detail"]


def test_yaml_alias_bomb_snapshot_is_refused(db) -> None:
    """The same bomb as a snapshot file is refused by the importer, nothing written."""
    tracemalloc.start()
    try:
        with pytest.raises(SnapshotError):
            import_texts([("bomb.yaml", ALIAS_BOMB)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND


def test_deeply_nested_input_is_refused_fast(cluster, token) -> None:
    """10 KB of `[` (YAML) and of nested JSON arrays are 400s, not a recursion-limit crawl."""
    assert_refused(post_yaml("[" * 10_000, token=token))
    nested = b'{"yaml": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    assert_refused(request("POST", WHATIF, body=nested, token=token))


def test_lone_surrogates_and_bad_utf8_are_400s(cluster, token) -> None:
    """A JSON body with a lone surrogate escape and a body that is not UTF-8 are refused."""
    assert_refused(request("POST", WHATIF, body=b'{"yaml": "kind: \\ud800"}', token=token))
    assert_refused(request("POST", WHATIF, body=b'{"yaml": "\xff\xfe"}', token=token))


def selector_claim(expression: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "regex", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu",
                                "selectors": [{"cel": {"expression": expression}}],
                            },
                        }
                    ]
                }
            },
        }
    )


def test_catastrophic_regex_runs_in_linear_time(cluster, token, monkeypatch) -> None:
    """`(a+)+$` against a long non-matching string is matched by RE2, never by backtracking."""
    engines = regex_engines(monkeypatch)
    expression = '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""'
    answer = post_yaml(selector_claim(expression), token=token)
    assert answer.status == 200, answer.body[:300]
    assert "(a+)+$" in engines["re2"] and "(a+)+$" not in engines["re"]
    assert answer.peak < MEMORY_BOUND


def test_backreferences_are_refused_at_compile_time(cluster, token) -> None:
    """RE2 syntax: a backreference is a 400 naming the selector, never evaluated."""
    answer = post_yaml(selector_claim('device.driver.find("(a)\\\\1") == "aa"'), token=token)
    assert_refused(answer)


def test_exponential_search_ends_within_its_budget(cluster, token, settings, monkeypatch) -> None:
    """A claim whose search would take minutes answers within the budget with `gaveUp`."""
    settings.WHATIF_BUDGET_SECONDS = 1
    # A tenth of a second per reading: the budget is ten of the search's clock checks.
    ticking = clock.install(monkeypatch, budget, simulation, tick=0.1)
    answer = post_yaml(exponential_claim(), token=token)
    assert answer.status == 200, answer.body[:300]
    # The deadline's own reading, the ten of the budget, and each of the 3 nodes' start.
    assert ticking.readings <= 1 + 10 + 3
    assert "gave up after 1 s" in answer.json()["gaveUp"]["message"]


def many_requests_claim(*, subrequests: int = 1, selectors: int = 0) -> str:
    sub = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    sel = [{"cel": {"expression": "true"}}] * selectors
    request_body = (
        {"firstAvailable": [{"name": f"s{i}", **sub} for i in range(subrequests)]}
        if subrequests > 1
        else {"exactly": {**sub, "selectors": sel}}
    )
    return yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", **request_body}]}},
        }
    )


def test_api_server_limits_on_claims(cluster, token) -> None:
    """1,000 firstAvailable subrequests (limit 8) and 10,000 selectors (limit 32) are 400s."""
    assert_refused(post_yaml(many_requests_claim(subrequests=1_000), token=token))
    assert_refused(post_yaml(many_requests_claim(selectors=10_000), token=token))


def test_malformed_workloads_are_400s(cluster, token) -> None:
    """A CronJob whose jobTemplate is a string and a pod whose metadata is a string are 400s."""
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}}
    cron["spec"] = {"schedule": "* * * * *", "jobTemplate": "x"}
    assert_refused(post_yaml(yaml.safe_dump(cron), token=token))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": {"containers": []}}
    assert_refused(post_yaml(yaml.safe_dump(pod), token=token))


@pytest.mark.parametrize(
    "path",
    [
        "/api/inventory/devices/?current=100%25s",
        "/api/inventory/devices/?attribute=a%25s=b",
        "/api/inventory/nodes/?ordering=--name",
        "/api/claims/resource-claims/?class=%27",
    ],
)
def test_bad_query_parameters_are_400s(cluster, token, path) -> None:
    """Percent signs, doubled minus signs and quotes in parameters are 400s, never 500s."""
    assert_refused(request("GET", path, token=token))


def mebibytes(count: int) -> Iterator[bytes]:
    """`count` MiB of body, one reused 1 MiB buffer at a time."""
    return itertools.repeat(b"x" * MIB, count)


def test_a_huge_body_is_refused_before_it_is_read(db) -> None:
    """A 100 MB anonymous POST is a 413 without buffering the body (declared or streamed)."""
    form = b"multipart/form-data"
    declared = request(
        "POST", "/healthz", stream=mebibytes(100), declared=100 * MIB, content_type=form
    )
    assert declared.status == 413 and declared.received == 0
    streamed = request("POST", "/healthz", stream=mebibytes(100), content_type=form)
    assert streamed.status == 413
    assert settings.MAX_REQUEST_BYTES < streamed.received <= settings.MAX_REQUEST_BYTES + MIB
    assert declared.peak < MEMORY_BOUND and streamed.peak < MEMORY_BOUND


def test_hostile_names_are_refused_at_import(db) -> None:
    """An object whose name the API server would refuse (a `/`) is refused by the importer."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a/b", "uid": "u1"}}
    with pytest.raises(SnapshotError) as caught:
        import_texts([("nodes.yaml", yaml.safe_dump(node))])
    assert "metadata.name" in str(caught.value)


async def _connect(headers: list[tuple[bytes, bytes]]) -> bool:
    communicator = WebsocketCommunicator(application, "/ws/live/?topics=overview", headers)
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return bool(connected)


@pytest.mark.django_db(transaction=True)
def test_websocket_refuses_other_origins_and_anonymous_users() -> None:
    """Another host, another port and no session are refused at the handshake."""
    host = (b"host", b"localhost:8000")
    assert not async_to_sync(_connect)([host, (b"origin", b"http://evil.example")])
    assert not async_to_sync(_connect)([host, (b"origin", b"http://localhost:9999")])
    assert not async_to_sync(_connect)([host, (b"origin", b"http://localhost:8000")])
