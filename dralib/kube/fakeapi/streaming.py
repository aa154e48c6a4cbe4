"""How the fake API server writes: Status bodies, chunked watch streams and their faults.

A watch is a 200 with `Transfer-Encoding: chunked`, one JSON event per line and per chunk, as the
API server flushes each; bookmarks every `bookmark_interval`; an ERROR event once the 200 is
sent (410 Expired history, 504 for a watch list from a version the server never reaches); the
stream ends at `timeoutSeconds` or the server's own cap. `KubeRequestHandler` routes requests
and answers lists and gets on top of this.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from dralib.kube.fakeapi import authz, options
from dralib.kube.fakeapi.bodies import (
    dumps,
    framed,
    line,
    selector,
    status_body,
    too_large_details,
    watch_event,
)
from dralib.kube.fakeapi.faults import Fault, FaultPlan
from dralib.kube.fakeapi.resources import ResourceType
from dralib.kube.fakeapi.selectors import Predicate, SelectorError
from dralib.kube.fakeapi.store import Expired, ObjectStore, TooLarge


class ServedApp(Protocol):
    """What a request handler reads and tells of the server it serves (`FakeApiServer`).

    Declared here, so that the handlers need nothing of the server module, which imports them.
    """

    host: str
    port: int
    token: str | None
    bookmark_interval: float
    max_watch_seconds: float
    too_large_wait: float
    watch_list: bool
    list_items_with_type_meta: bool
    continue_expired_token: bool
    rbac: authz.RbacTable
    _store: ObjectStore
    _faults: FaultPlan
    _stopping: threading.Event

    @property
    def served_versions(self) -> tuple[str, ...]: ...

    def _record_request(self, method: str, path: str, query: dict[str, str]) -> None: ...

    def _track_connection(self, conn: socket.socket, *, opened: bool) -> None: ...

    def _watch_opened(self) -> None: ...

    def _watch_closed(self) -> None: ...


# How often a waiting stream looks whether its client left or the server stops.
POLL_SECONDS = 0.25


class Route:
    """What a request path names: a resource at a group version, optionally a namespace and name."""

    def __init__(
        self, rt: ResourceType, *, group_version: str, namespace: str | None, name: str | None
    ) -> None:
        self.rt = rt
        self.group_version = group_version
        self.namespace = namespace
        self.name = name


class StreamingHandler(BaseHTTPRequestHandler):
    """The writing half of a request handler: Status bodies, chunks and watch streams."""

    @property
    def app(self) -> ServedApp:
        raise NotImplementedError  # the handler that routes knows its server

    def _wait_for_revision(self, wanted: int) -> None:
        deadline = time.monotonic() + self.app.too_large_wait
        store = self.app._store
        while store.revision < wanted and not self.app._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            store.wait(
                after=wanted - 1, timeout=min(left, POLL_SECONDS), stop=self.app._stopping.is_set
            )

    def _watch(self, route: Route, query: dict[str, str], fault: Fault | None) -> None:
        try:
            matches = selector(query)
            opts = options.parse(query)
            if opts.send_initial_events is not None and not self.app.watch_list:
                raise options.watch_list_forbidden()
            timeout = opts.timeout_seconds or self.app.max_watch_seconds
            rv = opts.resource_version
            requested = options.parse_rv(rv) if rv not in ("", "0") else None
        except (options.InvalidOptions, ValueError, SelectorError) as exc:
            self._send_query_error(exc)
            return
        watch_list = opts.send_initial_events is True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.app._watch_opened()
        try:
            if watch_list and requested is not None and requested > self.app._store.revision:
                # A watch list must start from data at least that new: wait, then fail as
                # the cacher does, with an ERROR event (the 200 is already sent).
                self._wait_for_revision(requested)
                if requested > self.app._store.revision:
                    error = TooLarge(requested, self.app._store.revision)
                    status = status_body(504, "Timeout", str(error))
                    status["details"] = too_large_details(error, retry_after=1)
                    self._chunk(line({"type": "ERROR", "object": status}))
                    self._end_chunks()
                    return
            self._stream(
                route,
                fault=fault,
                matches=matches,
                deadline=time.monotonic() + timeout,
                # Legacy watches without a version start with the current state; a watch list
                # always does; sendInitialEvents=false starts from now.
                initial_events=watch_list
                or (requested is None and opts.send_initial_events is None),
                start=None if watch_list else requested,
                initial_bookmark=watch_list and opts.allow_bookmarks,
                bookmarks=opts.allow_bookmarks,
            )
        finally:
            self.app._watch_closed()

    def _stream(
        self,
        route: Route,
        *,
        fault: Fault | None,
        matches: Predicate,
        deadline: float,
        initial_events: bool,
        start: int | None,
        initial_bookmark: bool,
        bookmarks: bool,
    ) -> None:
        store = self.app._store
        sent = 0
        if fault is not None and fault.kind == "hang":
            self._idle(min(fault.hang_seconds, deadline - time.monotonic()))
            self._end_chunks()
            return
        events: list[dict[str, Any]] = []
        if start is None:
            cursor, items = store.snapshot(route.rt, namespace=route.namespace, at=None)
            if initial_events:
                events = [{"type": "ADDED", "object": obj} for _, obj in items if matches(obj)]
        else:
            cursor = start
        # Like the cacher, nothing at or below the requested version is sent, bookmarks
        # included: a watch from a version the server has not reached yet stays silent.
        floor = cursor if start is not None else 0
        if initial_bookmark:
            events.append(self._bookmark(route, cursor, initial_end=True))
        next_bookmark = time.monotonic() + self.app.bookmark_interval
        stops_early = fault is not None and fault.kind in ("close", "cut")
        cutoff = fault.after_events if fault is not None and stops_early else None
        while True:
            if cutoff is None:
                if events:
                    # A chunk per event, as the API server flushes each; written together, as
                    # a backlog leaves its buffer in few packets.
                    self.wfile.write(b"".join(framed(line(event)) for event in events))
                    sent += len(events)
            else:
                for event in events:
                    if sent >= cutoff:
                        if fault is not None and fault.kind == "cut":
                            self._cut_chunk(line(event))
                        else:
                            self._end_chunks()
                        return
                    self._chunk(line(event))
                    sent += 1
            if self.app._stopping.is_set() or self._client_gone():
                self._abort()
                return
            now = time.monotonic()
            if now >= deadline:
                self._end_chunks()
                return
            if bookmarks and now >= next_bookmark:
                if cursor > floor:
                    self._chunk(line(self._bookmark(route, cursor)))
                next_bookmark = now + self.app.bookmark_interval
            wake = min(deadline, next_bookmark) if bookmarks else deadline
            # Wake at least every POLL_SECONDS seconds to notice a client that went away.
            store.wait(
                after=cursor,
                timeout=min(wake - time.monotonic(), POLL_SECONDS),
                stop=self.app._stopping.is_set,
            )
            try:
                cursor, changes = store.changes_since(
                    route.rt, after=cursor, namespace=route.namespace
                )
            except Expired as exc:
                status = status_body(410, "Expired", str(exc))
                self._chunk(line({"type": "ERROR", "object": status}))
                self._end_chunks()
                return
            events = [e for c in changes if (e := watch_event(c, matches)) is not None]

    def _bookmark(self, route: Route, cursor: int, *, initial_end: bool = False) -> dict[str, Any]:
        metadata: dict[str, Any] = {"resourceVersion": str(cursor)}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        kind = route.rt.kind
        obj = {"kind": kind, "apiVersion": route.group_version, "metadata": metadata}
        return {"type": "BOOKMARK", "object": obj}

    def _idle(self, seconds: float) -> None:
        """Send nothing for `seconds`, ending early if the server stops or the client leaves."""
        until = time.monotonic() + seconds
        while not self._client_gone():
            left = until - time.monotonic()
            if left <= 0 or self.app._stopping.wait(min(left, POLL_SECONDS)):
                return

    def _client_gone(self) -> bool:
        # A closed peer makes the socket readable with nothing to read.
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(framed(data))

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _cut_chunk(self, data: bytes) -> None:
        # Announce the whole chunk, deliver half of it, then drop the connection.
        self.wfile.write(b"%x\r\n%s" % (len(data), data[: len(data) // 2]))
        self._abort()

    def _abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_query_error(self, exc: Exception) -> None:
        """A query the API server refuses: 422 Invalid for bad options, else 400 BadRequest."""
        if isinstance(exc, options.InvalidOptions):
            self._send_status(422, "Invalid", str(exc), exc.details())
        else:
            self._send_status(400, "BadRequest", str(exc))

    def _send_status(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send_json(code, status_body(code, reason, message, details), headers)

    def _send_json(
        self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send_bytes(code, dumps(body), "application/json", headers)

    def _send_bytes(
        self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
