"""HTTP requests run their sync code on kept threads instead of a new thread each
(dashboard.threads), and a thread goes back only once its request's work has run."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.signals import request_finished

from dashboard.threads import KeptRequestThreads
from tests.asgi import asgi_request, http_scope


@pytest.mark.django_db(transaction=True)
def test_requests_reuse_kept_threads(settings) -> None:
    """120 requests through console.asgi, 40 at a time: at most 40 threads are made for them
    (one per request before), and Django's request code ran on those threads."""
    from console.asgi import application, request_threads

    settings.ALLOWED_HOSTS = ["testserver"]
    served: set[int] = set()

    def note(**_: Any) -> None:
        served.add(threading.get_ident())

    made = request_threads.made
    request_finished.connect(note, dispatch_uid="test_threads.note")
    try:

        async def rounds() -> list[int]:
            statuses: list[int] = []
            for _ in range(3):
                answers = await asyncio.gather(
                    *(asgi_request(application, "GET", "/healthz") for _ in range(40))
                )
                statuses += [status for status, _ in answers]
                # A thread goes back right after its request, from the thread itself.
                for _ in range(500):
                    if request_threads.idle() >= request_threads.made:
                        break
                    await asyncio.sleep(0.01)
            return statuses

        assert set(asyncio.run(rounds())) == {200}
    finally:
        request_finished.disconnect(dispatch_uid="test_threads.note")
    assert request_threads.made - made <= 40
    assert 1 <= len(served) <= 40
    assert threading.get_ident() not in served


def test_a_cancelled_requests_thread_is_not_lent_while_its_view_runs() -> None:
    """A request cancelled while its sync code runs keeps its thread until that code returns:
    the next request gets another thread, and the first is lent again only afterwards."""
    release = threading.Event()
    threads: list[int] = []

    def view(block: bool) -> None:
        threads.append(threading.get_ident())
        if block:
            release.wait(timeout=10)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await sync_to_async(view)(scope["path"] == "/block")

    kept = KeptRequestThreads(app)

    async def scenario() -> None:
        blocked = asyncio.ensure_future(kept(http_scope("/block"), _never, _ignore))
        while not threads:
            await asyncio.sleep(0.01)
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        await kept(http_scope("/other"), _never, _ignore)
        assert threads[1] != threads[0]  # the blocked thread was not lent
        release.set()
        while kept.idle() < 2:
            await asyncio.sleep(0.01)
        await kept(http_scope("/again"), _never, _ignore)
        await kept(http_scope("/again"), _never, _ignore)

    asyncio.run(scenario())
    assert kept.made == 2
    assert set(threads[2:]) <= set(threads[:2])


def test_threads_past_the_kept_number_end() -> None:
    """With room for one idle thread, two concurrent requests leave one thread kept."""
    started = threading.Barrier(2, timeout=10)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await sync_to_async(started.wait)()

    kept = KeptRequestThreads(app, keep=1)

    async def scenario() -> None:
        await asyncio.gather(*(kept(http_scope("/"), _never, _ignore) for _ in range(2)))
        for _ in range(100):
            if kept.made == 2 and kept.idle() == 1:
                break
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert (kept.made, kept.idle()) == (2, 1)


async def _never() -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {"type": "http.disconnect"}


async def _ignore(message: Any) -> None:
    return None
