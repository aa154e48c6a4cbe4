"""Stopping long work whose answer nobody waits for: the client went away, the server stops.

A what-if or diagnosis search asks the callable from `stop_check()` every millisecond or so
(`dralib.allocator.budget`). It turns True when either:

* this request is abandoned: `CancelOnDisconnect` wraps the HTTP application and gives every
  request its own flag, in a context variable that asgiref copies into the thread running a
  sync view. The flag is set when the server hands Django `http.disconnect` (the client closed
  the connection) or cancels the request's task (when it gives up on a request at shutdown);
* the process shuts down: `begin_shutdown()`, which the web server's launcher calls when
  SIGTERM or SIGINT asks it to stop. Work outside any request (the embedded diagnosis loop)
  sees this one only.

Without this a sync view runs to its end after its client left (Django can cancel only the
coroutine awaiting it), and the server cannot exit while the view's thread runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CLIENT_LEFT = "the client went away"
SHUTTING_DOWN = "the server is shutting down"
# How long a cancelled request's work may take to notice and unwind before the server moves on.
_UNWIND_SECONDS = 5.0


class RequestFlag:
    """One request's cancel flag and why it was set."""

    __slots__ = ("event", "reason")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()


_request: ContextVar[RequestFlag | None] = ContextVar("dashboard_cancel_request", default=None)
_shutting_down = threading.Event()
_stopped_lock = threading.Lock()
_stopped = 0


def begin_shutdown() -> None:
    """Tell every running search in this process to stop now."""
    if not _shutting_down.is_set():
        log.info("shutting down: running searches are cancelled")
    _shutting_down.set()


def shutting_down() -> bool:
    return _shutting_down.is_set()


def forget_shutdown() -> None:
    """Clear the process-wide flag (tests that simulate a shutdown in-process)."""
    _shutting_down.clear()


def stop_reason() -> str:
    """Why work of the current context should stop ("" while it is still wanted)."""
    if _shutting_down.is_set():
        return SHUTTING_DOWN
    flag = _request.get()
    if flag is not None and flag.event.is_set():
        return flag.reason
    return ""


def stop_check() -> Callable[[], bool]:
    """A cheap callable for the current context: True once its work should stop.

    Call it where the work starts (in the request's thread); the callable may then be asked from
    anywhere. The first True is counted (`stopped_searches`) and logged.
    """
    flag = _request.get()
    seen = False

    def stop() -> bool:
        nonlocal seen
        wanted = not _shutting_down.is_set() and (flag is None or not flag.event.is_set())
        if not wanted and not seen:
            seen = True
            _count_stop()
        return not wanted

    return stop


def _count_stop() -> None:
    global _stopped
    with _stopped_lock:
        _stopped += 1
    log.info("search cancelled: %s", stop_reason() or SHUTTING_DOWN)


def stopped_searches() -> int:
    """How many searches this process cancelled (client gone or shutdown) since it started."""
    with _stopped_lock:
        return _stopped


class CancelOnDisconnect:
    """ASGI middleware: each HTTP request gets a flag set once nobody waits for its answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        flag = RequestFlag()

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                flag.set(CLIENT_LEFT)
            return message

        # The task copies the context now: the application, and the threads of its sync views,
        # see this request's flag.
        token = _request.set(flag)
        try:
            task = asyncio.ensure_future(self.app(scope, watched_receive, send))
        finally:
            _request.reset(token)
        try:
            # asyncio.wait, unlike awaiting the task, returns at once when this call is
            # cancelled, so the flag is set before Django starts waiting for the view's thread.
            await asyncio.wait({task})
        except asyncio.CancelledError:
            flag.set(SHUTTING_DOWN if _shutting_down.is_set() else CLIENT_LEFT)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task}, timeout=_UNWIND_SECONDS)
            raise
        task.result()
