"""A what-if whose client goes away stops searching at once, keeps nothing, and says why.

Requests go through the real ASGI application (`console.asgi.application`); the client is an
ASGI `receive` that sends the body, waits, then reports `http.disconnect`, as the server does when
the connection closes. "At once" is counted in the search's own checks (one every
`CHECK_EVERY` steps): the first check after the request was cancelled stops the search.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.authtoken.models import Token

from claims.whatif import service
from claims.whatif.service import forget_simulations, kept_simulations, what_if
from claims.whatif.state import forget_cluster_state
from console.asgi import application
from dashboard.cancel import (
    SHUTTING_DOWN,
    CancelOnDisconnect,
    begin_shutdown,
    forget_shutdown,
    stop_check,
    stop_reason,
    stopped_searches,
)
from dralib.allocator import AllocationTimeout
from dralib.allocator.budget import SearchWatch
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_budget import exponential_claim, hostile_cluster

WHATIF = "/api/claims/what-if/"
# Far longer than the test may take: only the cancellation can end the search in time.
BUDGET = 60
# The assumed simulation (300 added nodes of 8 devices, ~3 MB when kept) must not stay behind.
KEPT_BOUND = 1024 * 1024
ONE_GPU = yaml.safe_dump(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
)


@pytest.fixture
def token(db) -> str:
    user = User.objects.create_user("leaver", password="leaver-password-long-enough")
    return Token.objects.create(user=user).key


class Checks(list[tuple[int, bool, bool]]):
    """Each budget check of a search: (steps, cancelled before the check, the check stopped it)."""

    def __init__(self) -> None:
        super().__init__()
        self.searching = threading.Event()  # set once a search is past its first steps


@pytest.fixture
def checks(monkeypatch) -> Checks:
    seen = Checks()
    check = SearchWatch.check

    def recorded(self: SearchWatch, *, steps: int, claim_index: int) -> None:
        # The check runs in the view's thread, which sees the request's cancel flag.
        cancelled = stop_reason() != ""
        try:
            check(self, steps=steps, claim_index=claim_index)
        except AllocationTimeout:
            seen.append((steps, cancelled, True))
            raise
        seen.append((steps, cancelled, False))
        if steps > 0:
            seen.searching.set()

    monkeypatch.setattr(SearchWatch, "check", recorded)
    return seen


def assert_stopped_at_the_first_check(checks: Checks) -> None:
    """The search ran, and stopped at the first check that came after the cancellation."""
    assert any(steps > 0 and not cancelled for steps, cancelled, _ in checks), "never searched"
    assert [stopped for _, _, stopped in checks].count(True) == 1
    assert checks[-1][2], "a check after the one that stopped the search"
    assert not [c for c in checks if c[1] and not c[2]], "a cancelled search went on"


@pytest.fixture
def cluster(db, settings) -> Iterator[None]:
    settings.WHATIF_BUDGET_SECONDS = BUDGET
    forget_cluster_state()
    forget_simulations()
    cache.clear()
    load_objects(hostile_cluster(nodes=3))
    yield
    forget_simulations()


async def _leave_early(body: bytes, token: str, *, leave_when: threading.Event) -> int:
    """POST the body, disconnect once `leave_when` is set; the status sent, 0 if none."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": WHATIF,
        "raw_path": WHATIF.encode(),
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Token {token}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent = [body]
    status = 0

    async def receive() -> dict[str, Any]:
        if sent:
            return {"type": "http.request", "body": sent.pop(), "more_body": False}
        # Mid-search: leaving before the view starts would only show that Django never ran it.
        for _ in range(BUDGET * 100):
            if leave_when.is_set():
                break
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await application(scope, receive, send)
    return status


def leave_early(payload: dict[str, Any], token: str, checks: Checks) -> tuple[int, int]:
    """(status, bytes still held once the view's work ended); the client leaves mid-search."""
    body = json.dumps(payload).encode()
    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    # As Django's test client does: the view runs in this thread, in the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        # async_to_sync returns once the sync view, which runs in this thread, has returned.
        status = async_to_sync(_leave_early)(body, token, leave_when=checks.searching)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return status, after - before


def test_a_search_stops_at_once_when_the_client_leaves(cluster, token, checks) -> None:
    """The client leaves mid-search: the search stops at its next check, counted as cancelled."""
    stopped = stopped_searches()
    status, _ = leave_early({"yaml": exponential_claim()}, token, checks)
    assert_stopped_at_the_first_check(checks)
    assert status == 0  # nothing was sent to a client that is gone
    assert stopped_searches() == stopped + 1


def test_a_cancelled_search_keeps_nothing(cluster, token, monkeypatch, checks) -> None:
    """Neither the partial answer nor the assumed simulation is kept after the client left."""
    written: list[str] = []

    class RecordingCache:
        def get(self, key: str, default: Any = None) -> Any:
            return cache.get(key, default)

        def set(self, key: str, value: Any, timeout: Any = None) -> None:
            written.append(key)
            cache.set(key, value, timeout)

    monkeypatch.setattr(service, "cache", RecordingCache())
    assume = [{"op": "add-nodes", "like": "node-0", "count": 300}]
    # A first request warms what every request keeps (URL resolvers, the cached cluster state,
    # compiled selectors), so that only what the cancelled one keeps is measured.
    leave_early({"yaml": exponential_claim()}, token, checks)
    checks.clear()
    checks.searching.clear()
    status, held = leave_early({"yaml": exponential_claim(), "assume": assume}, token, checks)
    assert_stopped_at_the_first_check(checks)
    assert kept_simulations() == (0, 0)
    assert not [key for key in written if key.startswith("whatif:result:")]
    assert held < KEPT_BOUND


def test_an_answered_question_is_unaffected(cluster, token) -> None:
    """A client that stays gets the whole answer; its assumed simulation is kept."""
    assume = [{"op": "add-nodes", "like": "node-0", "count": 2}]
    answer = what_if(ONE_GPU, assume=assume, budget=BUDGET)
    assert answer["fits"] is True and "gaveUp" not in answer
    assert kept_simulations() == (1, 2 * 8)


def test_a_search_started_while_shutting_down_stops_at_once(cluster, checks) -> None:
    """After begin_shutdown a search gives up before any work and says the server stops."""
    begin_shutdown()
    try:
        answer = what_if(exponential_claim(), budget=BUDGET, use_cache=False)
    finally:
        forget_shutdown()
    assert checks == [(0, True, True)]  # its first check, before a single step
    assert answer["gaveUp"]["cancelled"] is True
    assert SHUTTING_DOWN in answer["gaveUp"]["message"]
    assert all("cancelled" in str(node) for node in answer["nodes"])


def test_a_cancelled_request_task_sets_the_flag_its_thread_sees() -> None:
    """When the server cancels a request (on shutdown), its sync work is told at once."""
    checks: list[Callable[[], bool]] = []
    told: list[bool] = []
    started = threading.Event()
    finished = threading.Event()

    def work() -> None:
        check = stop_check()
        checks.append(check)
        started.set()
        deadline = time.monotonic() + BUDGET
        while not check() and time.monotonic() < deadline:
            time.sleep(0.005)
        told.append(check())
        finished.set()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await sync_to_async(work, thread_sensitive=False)()

    async def serve_then_cancel() -> bool:
        task = asyncio.ensure_future(CancelOnDisconnect(app)({"type": "http"}, None, None))
        while not started.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return checks[0]()  # what the work's next poll will read

    assert async_to_sync(serve_then_cancel)() is True  # set before the request task ended
    assert finished.wait(BUDGET)
    assert told == [True]  # the work stopped because it was told, not at its deadline
