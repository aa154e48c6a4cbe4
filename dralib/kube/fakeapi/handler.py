"""The HTTP side of the fake API server: routing, discovery, lists and gets (watches: streaming).

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
import socket
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dralib.kube.fakeapi import authz, options, resources
from dralib.kube.fakeapi.bodies import (
    CONTINUE_EXPIRED,
    INCONSISTENT_CONTINUE,
    decode_continue,
    dumps,
    encode_continue,
    filtered,
    loads_body,
    selector,
    status_body,
    too_large_details,
)
from dralib.kube.fakeapi.faults import Fault, Verb
from dralib.kube.fakeapi.resources import DRA_GROUP
from dralib.kube.fakeapi.selectors import SelectorError
from dralib.kube.fakeapi.store import Expired, Key, Obj, TooLarge
from dralib.kube.fakeapi.streaming import Route, ServedApp, StreamingHandler

# A SubjectAccessReview is a few hundred bytes; the API server caps request bodies at 3 MiB.
_MAX_BODY = 3 * 1024 * 1024


class FakeHttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows the FakeApiServer it serves."""

    daemon_threads = True
    block_on_close = False
    # Go's net.Listen (kube-apiserver) takes the kernel's somaxconn as its backlog; socketserver's
    # 5 made the SYNs of fifteen watchers connecting at once overflow it while the accepting
    # thread waited for the GIL, and the kernel's 1 s SYN retransmit became a watcher's start-up.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], app: ServedApp) -> None:
        self.app = app
        super().__init__(address, KubeRequestHandler)


class KubeRequestHandler(StreamingHandler):
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
        route = Route(rt, group_version=group_version, namespace=namespace, name=name)
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

    def _get(self, route: Route) -> None:
        assert route.name is not None
        obj = self.app._store.get(route.rt, namespace=route.namespace, name=route.name)
        if obj is not None:
            self._send_json(200, obj)
            return
        group = route.rt.group
        qualified = f"{route.rt.plural}.{group}" if group else route.rt.plural
        details = {"name": route.name, "group": group, "kind": route.rt.plural}
        self._send_status(404, "NotFound", f'{qualified} "{route.name}" not found', details)

    def _list(self, route: Route, query: dict[str, str], fault: Fault | None) -> None:
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
        except (options.InvalidOptions, ValueError, SelectorError) as exc:
            self._send_query_error(exc)
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

    def _send_cut_body(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self._abort()

    def _not_found(self) -> None:
        message = "the server could not find the requested resource"
        self._send_status(404, "NotFound", message, details={})
