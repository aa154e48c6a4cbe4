"""One render of a page fragment for every open page refreshing after the same live event.

Every open page refetches its fragments when a live event arrives, so a hundred open Claims
pages rendered the same table a hundred times per change, and the last of them waited seconds
(`tests/benchmarks/bench_live.py`). A live refresh names its event (`?live=<seq>`, see
`static/dashboard/live.js`); the event is sent after its transaction commits, so any render that
starts once a request naming it has arrived shows that commit. Requests for the same fragment
URL (the event's id included) share one render: the first renders while the others wait for it,
and later ones take the kept result for a short while. A new event has a new id, hence a new URL:
nothing older than the event that asked is ever served.

Only fragments for signed-in users are shared, and only between people who see the same
namespaces (the key holds `dashboard.registry.viewer_key`, which the app deciding visibility
registers); a fragment holding a CSRF token (a form) is never shared.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from django.db import connections
from django.http import HttpRequest, HttpResponse

from dashboard.registry import viewer_key

# How long a render is kept for the requests of one event, and how many renders are kept.
KEEP_SECONDS = 30.0
KEEP_RENDERS = 256
_SEQ_LENGTH = 64

_lock = threading.Lock()
# key -> (rendered at, status, content type, body); most recent last.
_kept: OrderedDict[str, tuple[float, int, str, bytes]] = OrderedDict()
# key -> the lock the first request of a key holds while it renders.
_rendering: dict[str, threading.Lock] = {}


def shareable(request: HttpRequest) -> str | None:
    """The key of a live refresh other pages may share, or None for any other request."""
    seq = request.GET.get("live", "")
    if (
        request.method != "GET"
        or not request.GET.get("fragment")
        or not seq
        or len(seq) > _SEQ_LENGTH
        or not all(c in "0123456789abcdef" for c in seq)
        or not request.user.is_authenticated
    ):
        return None
    return f"{request.get_full_path()}#{viewer_key(request)}"


def render_shared(key: str, render: Callable[[], HttpResponse]) -> HttpResponse:
    """The kept render of `key`, or one render made now and shared with concurrent requests."""
    kept = _recall(key)
    if kept is not None:
        return kept
    with _lock:
        gate = _rendering.setdefault(key, threading.Lock())
    if not gate.acquire(blocking=False):
        # Another request renders it: this one most likely only waits for its result, so its
        # database connection goes back to the pool meanwhile, for the other pages' sign-in
        # reads (100 waiting pages held every pooled connection while one rendered).
        _release_connections()
        gate.acquire()
    try:
        kept = _recall(key)
        if kept is not None:
            return kept
        try:
            response = render()
            _keep(key, response)
        finally:
            with _lock:
                _rendering.pop(key, None)
    finally:
        gate.release()
    return response


def _release_connections() -> None:
    """Close this thread's database connections outside a transaction (pooled: give them back;
    the next query takes one again)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def forget() -> None:
    """Drop every kept render (tests)."""
    with _lock:
        _kept.clear()


def _recall(key: str) -> HttpResponse | None:
    with _lock:
        entry = _kept.get(key)
        if entry is None or time.monotonic() - entry[0] > KEEP_SECONDS:
            return None
        _kept.move_to_end(key)
    _, status, content_type, body = entry
    return HttpResponse(body, status=status, content_type=content_type)


def _keep(key: str, response: HttpResponse) -> None:
    if response.status_code != 200 or response.streaming or response.cookies:
        return
    body = response.content
    if b"csrfmiddlewaretoken" in body:
        return
    with _lock:
        _kept[key] = (time.monotonic(), 200, response["Content-Type"], body)
        _kept.move_to_end(key)
        while len(_kept) > KEEP_RENDERS:
            _kept.popitem(last=False)


class SharedFragmentMiddleware:
    """Serves live refreshes of the same fragment for the same event from one view call.

    Placed after the authentication middleware: it needs `request.user`. The whole view is
    shared, its queries included, not only the template.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        key = shareable(request)
        if key is None:
            return self.get_response(request)
        return render_shared(key, lambda: self.get_response(request))
