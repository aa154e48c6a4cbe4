"""The HTTP side of the fake API server: routing, discovery, lists, gets and chunked watches.

Answers the way kube-apiserver answers over JSON: Status bodies for errors, `kind: XList` with
list metadata for lists (items without kind/apiVersion, as real servers send them), one JSON event
per line on chunked watch streams, 410 Expired for versions older than the retained history.

resourceVersions as the cacher and etcd3 storage treat them: a watch from a version the server
has not reached is a 200 that stays silent until changes pass it (bookmarks included); a list
NotOlderThan a future version waits `too_large_wait` (3 s upstream), then 504 "Too large resource
version" with Retry-After; Exact reads of a future revision are an immediate 504; an expired
continue token is a 410 carrying a token to go on at the latest revision; watch lists
(`sendInitialEvents=true`) end their initial state with a bookmark annotated
`k8s.io/initial-events-end`. Query rules are in `options`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from dralib.kube.fakeapi import authz, options, resources
from dralib.kube.fakeapi.bodies import (
    CONTINUE_EXPIRED,
    INCONSISTENT_CONTINUE,
    decode_continue,
    dumps,
    encode_continue,
    filtered,
    framed,
    line,
    loads_body,
    selector,
    status_body,
    too_large_details,
    watch_event,
)
from dralib.kube.fakeapi.faults import Fault, FaultPlan, Verb
from dralib.kube.fakeapi.resources import DRA_GROUP, ResourceType
from dralib.kube.fakeapi.selectors import (
    Predicate,
    SelectorError,
)
from dralib.kube.fakeapi.store import Expired, Key, Obj, ObjectStore, TooLarge


class ServedApp(Protocol):
    """What a request handler reads and tells of the server it serves (`FakeApiServer`).

    Declared here, so that the handler needs nothing of the server module, which imports it.
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


_POLL = 0.25
# A SubjectAccessReview is a few hundred bytes; the API server caps request bodies at 3 MiB.
_MAX_BODY = 3 * 1024 * 1024


class FakeHttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows the FakeApiServer it serves."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], app: ServedApp) -> None:
        self.app = app
        super().__init__(address, KubeRequestHandler)


class _Route:
    """What a request path names: a resource at a group version, optionally a namespace and name."""

    def __init__(
        self, rt: ResourceType, *, group_version: str, namespace: str | None, name: str | None
    ) -> None:
        self.rt = rt
        self.group_version = group_version
        self.namespace = namespace
        self.name = name


class KubeRequestHandler(BaseHTTPRequestHandler):
    """One connection to the fake API server; HTTP/1.1 keep-alive like a real API server."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Go's net package sets on every connection the API server accepts: without
    # it a request whose body follows its headers waits out the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    server: FakeHttpServer

    @property
    def app(self) -> ServedApp:
        return self.server.app

    def setup(self) -> None:
        super().setup()
        self.app._track_connection(self.connection, opened=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.app._track_connection(self.connection, opened=False)

    def log_message(self, format: str, *args: Any) -> None:
        # The request log on the server object replaces stderr noise.
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self.app._record_request("GET", url.path, query)
        if self.app.token and self.headers.get("Authorization") != f"Bearer {self.app.token}":
            self._send_status(401, "Unauthorized", "Unauthorized")
            return
        try:
            self._route(url.path, query)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - answer like a server, never drop silently
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._send_status(500, "InternalError", f"fake API server error: {exc!r}")

    def _reject(self) -> None:
        self._send_status(405, "MethodNotAllowed", f"the server does not allow {self.command} here")

    do_PUT = do_PATCH = do_DELETE = _reject

    def do_POST(self) -> None:
        # The one create the server answers: a SubjectAccessReview (a review is computed, never
        # stored). Everything else stays read-only.
        url = urlsplit(self.path)
        self.app._record_request("POST", url.path, {})
        if self.app.token and self.headers.get("Authorization") != f"Bearer {self.app.token}":
            self._send_status(401, "Unauthorized", "Unauthorized")
            return
        if url.path.rstrip("/") != f"/apis/{authz.AUTHORIZATION_GROUP}/v1/subjectaccessreviews":
            # The body stays unread: the connection cannot carry another request.
            self.close_connection = True
            self._reject()
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= _MAX_BODY:
            self.close_connection = True
            self._send_status(400, "BadRequest", "the request body is missing or too large")
            return
        try:
            review = loads_body(self.rfile.read(length))
        except ValueError as exc:
            self._send_status(400, "BadRequest", f"couldn't decode the body: {exc}")
            return
        kind = review.get("kind") if isinstance(review, dict) else None
        if kind not in (None, authz.SAR_KIND):
            self._send_status(400, "BadRequest", f"a {kind} is not a {authz.SAR_KIND}")
            return
        causes = authz.validate_review(review)
        if causes:
            joined = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
            message = f'{authz.SAR_KIND}.{authz.AUTHORIZATION_GROUP} "" is invalid: ' + (
                joined if len(causes) == 1 else f"[{joined}]"
            )
            details = {"group": authz.AUTHORIZATION_GROUP, "kind": authz.SAR_KIND, "causes": causes}
            self._send_status(422, "Invalid", message, details)
            return
        self._send_json(201, authz.answer_review(self.app.rbac, review))

    def _route(self, path: str, query: dict[str, str]) -> None:
        parts = [p for p in path.split("/") if p]
        served = self.app.served_versions
        if parts == ["version"]:
            self._send_json(200, resources.version_info(served))
        elif parts in (["healthz"], ["readyz"], ["livez"]):
            self._send_bytes(200, b"ok", "text/plain; charset=utf-8")
        elif parts == ["api"]:
            address = f"{self.app.host}:{self.app.port}"
            self._send_json(200, resources.core_api_versions(address))
        elif parts == ["api", "v1"]:
            self._send_json(200, resources.core_resource_list())
        elif parts[:2] == ["api", "v1"]:
            self._resource(parts[2:], query, group_version="v1", plurals=resources.CORE_PLURALS)
        elif parts == ["apis"]:
            self._send_json(200, resources.group_list(served))
        elif parts == ["apis", DRA_GROUP] and served:
            self._send_json(200, resources.dra_group(served))
        elif len(parts) >= 3 and parts[:2] == ["apis", DRA_GROUP] and parts[2] in served:
            version = parts[2]
            if len(parts) == 3:
                self._send_json(200, resources.dra_resource_list(version))
            else:
                plurals = resources.DRA_PLURALS_BY_VERSION[version]
                group_version = f"{DRA_GROUP}/{version}"
                self._resource(parts[3:], query, group_version=group_version, plurals=plurals)
        elif len(parts) >= 2 and parts[0] == "apis" and parts[1] in resources.FIXED_GROUPS:
            self._fixed_group(parts[1], parts[2:], query)
        else:
            self._not_found()

    def _fixed_group(self, group: str, rest: list[str], query: dict[str, str]) -> None:
        version, plurals = resources.FIXED_GROUPS[group]
        if not rest:
            self._send_json(200, resources.fixed_group(group))
        elif rest[0] != version:
            self._not_found()
        elif len(rest) == 1:
            self._send_json(200, resources.fixed_resource_list(group))
        else:
            self._resource(rest[1:], query, group_version=f"{group}/{version}", plurals=plurals)

    def _resource(
        self,
        rest: list[str],
        query: dict[str, str],
        *,
        group_version: str,
        plurals: tuple[str, ...],
    ) -> None:
        namespace: str | None = None
        if len(rest) in (3, 4) and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 2 or rest[0] not in plurals:
            self._not_found()
            return
        rt = resources.RESOURCES[rest[0]]
        if namespace is not None and not rt.namespaced:
            self._not_found()
            return
        name = rest[1] if len(rest) == 2 else None
        if name is not None and rt.namespaced and namespace is None:
            self._not_found()
            return
        route = _Route(rt, group_version=group_version, namespace=namespace, name=name)
        verb: Verb = "get" if name else ("watch" if query.get("watch") in options.TRUE else "list")
        fault = self.app._faults.take(resource=rt.plural, verb=verb)
        if fault is not None and self._early_fault(fault, verb):
            return
        if verb == "get":
            self._get(route)
        elif verb == "list":
            self._list(route, query, fault)
        else:
            self._watch(route, query, fault)

    def _early_fault(self, fault: Fault, verb: Verb) -> bool:
        """Apply a fault that replaces the whole answer; False when the handler must go on."""
        if fault.kind == "throttle":
            self._send_status(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                details={"retryAfterSeconds": fault.retry_after},
                headers={"Retry-After": str(fault.retry_after)},
            )
            return True
        if fault.kind == "error":
            message = 'an error on the server ("injected fault") has prevented the request'
            self._send_status(500, "InternalError", message)
            return True
        if verb == "watch":
            return False
        if fault.kind == "hang":
            self._idle(fault.hang_seconds)
            self.close_connection = True
            return True
        if fault.kind == "close":
            self.close_connection = True
            return True
        return False

    def _get(self, route: _Route) -> None:
        assert route.name is not None
        obj = self.app._store.get(route.rt, namespace=route.namespace, name=route.name)
        if obj is not None:
            self._send_json(200, obj)
            return
        group = route.rt.group
        qualified = f"{route.rt.plural}.{group}" if group else route.rt.plural
        details = {"name": route.name, "group": group, "kind": route.rt.plural}
        self._send_status(404, "NotFound", f'{qualified} "{route.name}" not found', details)

    def _list(self, route: _Route, query: dict[str, str], fault: Fault | None) -> None:
        try:
            matches = selector(query)
            opts = options.parse(query)
            limit = opts.limit
            start: Key | None = None
            at: int | None = None
            not_older_than = 0
            if opts.continue_token:
                if opts.resource_version not in ("", "0"):
                    raise ValueError(
                        "specifying resource version is not allowed when using continue"
                    )
                continued, start = decode_continue(opts.continue_token)
                # A token of revision -1 (handed out after compaction) continues at the latest.
                at = continued if continued > 0 else None
            elif opts.resource_version == "0":
                # Served from the cache: real servers may ignore limit here, and do.
                limit = 0
            elif opts.resource_version:
                rv = options.parse_rv(opts.resource_version)
                # Exact, and the legacy limit+resourceVersion, read that revision from etcd;
                # NotOlderThan (and the legacy form without limit) is served by the cache.
                if opts.match == options.EXACT or (limit and not opts.match):
                    at = rv
                else:
                    not_older_than = rv
        except options.InvalidOptions as exc:
            self._send_status(422, "Invalid", str(exc), exc.details())
            return
        except (ValueError, SelectorError) as exc:
            self._send_status(400, "BadRequest", str(exc))
            return
        store = self.app._store
        try:
            if not_older_than > store.revision:
                self._wait_for_revision(not_older_than)
                if not_older_than > store.revision:
                    # The cacher waits ~3 s for its cache to catch up, then asks to retry.
                    raise TooLarge(not_older_than, store.revision)
            # A page of an unfiltered list across namespaces is cut from the store's key order;
            # anything else is filtered from the whole snapshot.
            paged = bool(limit) and route.namespace is None and not filtered(query)
            if paged:
                revision, page, remaining = store.page(route.rt, at=at, after=start, limit=limit)
            else:
                revision, items = store.snapshot(
                    route.rt, namespace=route.namespace, at=at, after=start
                )
        except Expired as exc:
            if start is not None:
                self._send_continue_expired(start)
            else:
                self._send_status(410, "Expired", str(exc))
            return
        except TooLarge as exc:
            retry = 1 if not_older_than else 0
            self._send_too_large(exc, retry_after=retry)
            return
        if not paged:
            selected = [(k, o) for k, o in items if matches(o) and (start is None or k > start)]
            page = selected[:limit] if limit else selected
            remaining = len(selected) - len(page)
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if limit and remaining > 0:
            metadata["continue"] = encode_continue(revision, page[-1][0])
            if not filtered(query):
                metadata["remainingItemCount"] = remaining
        body = {
            "kind": f"{route.rt.kind}List",
            "apiVersion": route.group_version,
            "metadata": metadata,
            "items": [self._list_item(obj) for _, obj in page],
        }
        if fault is not None and fault.kind == "cut":
            self._send_cut_body(dumps(body))
        else:
            self._send_json(200, body)

    def _wait_for_revision(self, wanted: int) -> None:
        deadline = time.monotonic() + self.app.too_large_wait
        store = self.app._store
        while store.revision < wanted and not self.app._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            store.wait(after=wanted - 1, timeout=min(left, _POLL), stop=self.app._stopping.is_set)

    def _send_too_large(self, exc: TooLarge, *, retry_after: int) -> None:
        self._send_status(
            504,
            "Timeout",
            str(exc),
            too_large_details(exc, retry_after=retry_after),
            headers={"Retry-After": str(retry_after)} if retry_after else None,
        )

    def _send_continue_expired(self, start: Key) -> None:
        if not self.app.continue_expired_token:
            self._send_status(410, "Expired", CONTINUE_EXPIRED)
            return
        # As etcd3's handleCompactedErrorForPaging: a token that continues at the latest
        # revision (-1), for clients willing to accept an inconsistent list.
        body = status_body(410, "Expired", INCONSISTENT_CONTINUE)
        body["metadata"] = {"continue": encode_continue(-1, start)}
        self._send_json(410, body)

    def _list_item(self, obj: Obj) -> Obj:
        if self.app.list_items_with_type_meta:
            return obj
        return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}

    def _watch(self, route: _Route, query: dict[str, str], fault: Fault | None) -> None:
        try:
            matches = selector(query)
            opts = options.parse(query)
            if opts.send_initial_events is not None and not self.app.watch_list:
                raise options.watch_list_forbidden()
            timeout = opts.timeout_seconds or self.app.max_watch_seconds
            rv = opts.resource_version
            requested = options.parse_rv(rv) if rv not in ("", "0") else None
        except options.InvalidOptions as exc:
            self._send_status(422, "Invalid", str(exc), exc.details())
            return
        except (ValueError, SelectorError) as exc:
            self._send_status(400, "BadRequest", str(exc))
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
        route: _Route,
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
            # Wake at least every _POLL seconds to notice a client that went away.
            store.wait(
                after=cursor,
                timeout=min(wake - time.monotonic(), _POLL),
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

    def _bookmark(self, route: _Route, cursor: int, *, initial_end: bool = False) -> dict[str, Any]:
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
            if left <= 0 or self.app._stopping.wait(min(left, _POLL)):
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

    def _send_cut_body(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self._abort()

    def _abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _not_found(self) -> None:
        message = "the server could not find the requested resource"
        self._send_status(404, "NotFound", message, details={})

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
