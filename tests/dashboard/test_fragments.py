"""Live refreshes of the same fragment for the same event share one view call."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpResponse
from django.test import RequestFactory

from dashboard import fragments, scope
from dashboard.fragments import SharedFragmentMiddleware

SEQ = "0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    fragments.forget()


def _request(path: str, *, user=None):
    request = RequestFactory().get(path)
    request.user = user or User(username="viewer", is_active=True)
    return request


class CountingView:
    """A view that takes a while and counts its calls, as a page's fragment view would."""

    def __init__(self, body: bytes = b"<table>rows</table>", delay: float = 0.2) -> None:
        self.calls = 0
        self.body = body
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, request) -> HttpResponse:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        return HttpResponse(self.body, content_type="text/html; charset=utf-8")


def test_pages_refreshing_for_one_event_share_one_view_call() -> None:
    """Twenty concurrent requests for one fragment and event make one view call, same body."""
    view = CountingView()
    middleware = SharedFragmentMiddleware(view)
    bodies: list[bytes] = []
    threads = [
        threading.Thread(
            target=lambda: bodies.append(
                middleware(_request(f"/claims/?fragment=table&live={SEQ}")).content
            )
        )
        for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert view.calls == 1
    assert bodies == [b"<table>rows</table>"] * 20


def test_a_new_event_renders_again() -> None:
    """Another event id is another URL: nothing rendered for an earlier event is served."""
    view = CountingView(delay=0)
    middleware = SharedFragmentMiddleware(view)
    middleware(_request(f"/claims/?fragment=table&live={SEQ}"))
    middleware(_request("/claims/?fragment=table&live=fedcba"))
    middleware(_request(f"/claims/?fragment=table&live={SEQ}&page=2"))
    assert view.calls == 3


@pytest.mark.parametrize(
    "path",
    [
        "/claims/?fragment=table",  # not a live refresh: a page load or a filter change
        "/claims/?live=" + SEQ,  # a whole page
        "/claims/?fragment=table&live=not-hex!",
        "/claims/?fragment=table&live=" + "a" * 65,
    ],
)
def test_other_requests_are_never_shared(path: str) -> None:
    """Only live refreshes of a fragment, with a well-formed event id, are shared."""
    view = CountingView(delay=0)
    middleware = SharedFragmentMiddleware(view)
    middleware(_request(path))
    middleware(_request(path))
    assert view.calls == 2


def test_anonymous_readers_and_forms_are_never_shared() -> None:
    """Public read (no user) and a fragment with a CSRF token are rendered per request."""
    anonymous = CountingView(delay=0)
    middleware = SharedFragmentMiddleware(anonymous)
    for _ in range(2):
        middleware(_request(f"/claims/?fragment=table&live={SEQ}", user=AnonymousUser()))
    assert anonymous.calls == 2
    form = CountingView(body=b'<input name="csrfmiddlewaretoken" value="x">', delay=0)
    middleware = SharedFragmentMiddleware(form)
    for _ in range(2):
        middleware(_request(f"/what-if/?fragment=form&live={SEQ}"))
    assert form.calls == 2


@pytest.mark.django_db(transaction=True)
def test_a_page_waiting_for_anothers_render_gives_its_connection_back() -> None:
    """A refresh that waits while another request renders the same fragment holds no database
    connection meanwhile (pooled: it goes back for the other pages); it gets the render."""
    from django.db import connection, connections

    if connection.vendor == "sqlite":
        pytest.skip("in-memory SQLite keeps its one connection; the PostgreSQL run checks")
    rendering = threading.Event()
    seen: dict[str, object] = {}
    calls: list[bool] = []

    def render(request) -> HttpResponse:
        rendering.set()
        # Finish only once the waiting page's connection is closed (it waits for this render).
        for _ in range(1000):
            wrapper = seen.get("wrapper")
            if wrapper is not None and wrapper.connection is None:  # type: ignore[attr-defined]
                break
            time.sleep(0.01)
        calls.append(True)
        return HttpResponse(b"<table>rows</table>", content_type="text/html")

    middleware = SharedFragmentMiddleware(render)
    path = f"/claims/?fragment=table&live={SEQ}"
    renderer = threading.Thread(target=lambda: middleware(_request(path)))
    renderer.start()
    assert rendering.wait(timeout=10)

    def waiter() -> None:
        try:
            User.objects.count()  # the sign-in read opens a connection
            seen["open before"] = connection.connection is not None
            seen["wrapper"] = connections["default"]
            seen["body"] = middleware(_request(path)).content
            seen["open after"] = connection.connection is not None
        finally:
            connection.close()

    waiting = threading.Thread(target=scope.carried(waiter))
    waiting.start()
    waiting.join()
    renderer.join()
    assert seen["open before"] is True and seen["open after"] is False
    assert seen["body"] == b"<table>rows</table>" and calls == [True]
