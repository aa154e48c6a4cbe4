"""Request threads kept for the next requests.

Django runs an ASGI request's sync code (the middlewares and the view) on a thread made for that
request, and joins it afterwards on another thread made for the join. With a hundred open pages
refreshing after one change, the event loop spent its time starting threads: `Thread.start` waits
until the new thread has run, and that thread waits for the interpreter lock behind every busy
request, so the live events of the next change sat undelivered meanwhile (bench_live, a fifth of
the event loop's samples). `KeptRequestThreads` lends each HTTP request a one-thread executor
from those kept idle (Django's own per-request context then defers to it) and takes it back once
everything the request queued on it has run; a request finding none idle gets a new one, so
nothing ever waits for a thread. A reused thread starts clean as under WSGI: the request's
database connections are closed when it ends (the ASGI application's `request_finished`
receiver).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import AsyncToSync, ThreadSensitiveContext

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

# Idle threads kept; past it a request's thread ends with it, as Django's did. A hundred open
# pages refresh at once after a change.
KEEP_IDLE = 128


class KeptRequestThreads:
    """ASGI middleware: HTTP requests run their sync code on threads kept for reuse."""

    def __init__(self, app: ASGIApp, *, keep: int = KEEP_IDLE) -> None:
        self.app = app
        self.keep = keep
        self._lock = threading.Lock()
        self._idle: list[ThreadPoolExecutor] = []
        # Threads made so far (each executor has one worker): tests count them.
        self.made = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        # Called from sync code through async_to_sync (a test in its transaction), Django runs
        # the request on the caller's thread; a lent thread would hide that thread from it.
        if scope["type"] != "http" or getattr(AsyncToSync.executors, "current", None):
            await self.app(scope, receive, send)
            return
        executor = self._borrow()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        finally:
            # Queued behind the request's own work: a cancelled request's view may still run
            # (Django stops awaiting it, not the thread), and the worker runs calls in order.
            executor.submit(self._give_back, executor)

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def _borrow(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.made += 1
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def _give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        # From its own worker: no wait, the thread ends once this call returns.
        executor.shutdown(wait=False)
