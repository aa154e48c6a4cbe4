"""The watch loop of one kind, the way client-go's reflector runs it: list, watch, repeat.

`KindWatcher.run()` is the tiny outer loop: it calls `step()` and turns failures into waits
(backoff with jitter, Retry-After on 429) or a relist (410 Gone, too large resourceVersion).
`step()` discovers the served version when needed, checks which cluster answers, syncs the
whole state when needed and follows one watch connection. It writes through a `Sink` (the
batched form of client-go's reflector store): each batch with its resourceVersion, each list
with its own, in one transaction on the sink's side. The loop imports no Django and no model.

A stored cursor is trusted only when the server proves it. On start the watcher lists, as the
reflector does (`WatchOptions.list_on_start`); on every reconnect it checks that the cluster is
the same one (the uid of the kube-system namespace) and that the cursor is not ahead of the
server (a `limit=1` list at `resourceVersionMatch=NotOlderThan` from the cursor: the server,
which alone may compare its resourceVersions, answers 504 "Too large resource version" when it
went back, after an etcd restore or on a new cluster). A watch from a future resourceVersion
would otherwise be answered with silence forever. A different cluster drops the stored objects
first; a server behind the cursor means a relist.

The whole state comes from a watch list (`sendInitialEvents=true`, client-go's WatchListClient)
where the server supports it, else from a paginated list.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dralib.kube.client import ApiStatusError, KubeClient
from dralib.kube.discovery import Discovery, discover
from dralib.kube.kinds import KindSpec
from inventory.sync.watch.events import (
    MAX_BATCH_EVENTS,
    Batch,
    StreamSource,
    WatchListUnsupported,
    batch_events,
    initial_events,
)
from inventory.sync.watch.sink import Listing, LostOwnership, Sink

log = logging.getLogger(__name__)

JSON = dict[str, Any]
CLUSTER_IDENTITY_PATH = "/api/v1/namespaces/kube-system"
# Objects per page of a list (`limit`), as client-go's pager asks; the server may send fewer.
# settings.LIST_PAGE_SIZE sets it for the watchers.
LIST_PAGE_SIZE = 500


@dataclass(frozen=True)
class WatchOptions:
    """Timings and sizes of a watch loop; defaults suit a real cluster, tests shrink them."""

    timeout_seconds: int = 290
    read_timeout: float | None = None  # default: timeout_seconds + 15 (silence = dead link)
    page_size: int = LIST_PAGE_SIZE
    max_events: int = MAX_BATCH_EVENTS
    max_delay: float = 0.1
    # A batch ends once its stream is quiet this long: a lone change commits at once instead
    # of waiting out max_delay, a backlog still fills whole batches.
    linger: float | None = 0.005
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    # A watch that has stayed up this long resets the backoff: after an outage, the next
    # failure is retried quickly again, not at the cap the outage reached.
    healthy_after: float = 10.0
    not_served_poll: float = 60.0
    heartbeat_every: float = 5.0
    list_attempts: int = 3
    # Sync the whole state when a watcher starts, whatever cursor is stored (the reflector
    # does); off: resume the stored cursor when the server proves it.
    list_on_start: bool = True
    # Sync the state through a watch list where the server has them.
    watch_list: bool = True

    @property
    def effective_read_timeout(self) -> float:
        if self.read_timeout is not None:
            return self.read_timeout
        return float(self.timeout_seconds + 15)


class ClusterUnknown(Exception):
    """The server no longer says which cluster it is, though it said so before."""


class RateMeter:
    """Events per second over a sliding window."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()
        self._started: float | None = None

    def add(self, count: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        if self._started is None:
            self._started = now
        self._samples.append((now, count))
        while self._samples and self._samples[0][0] < now - self.window:
            self._samples.popleft()
        span = max(min(now - self._started, self.window), 1.0)
        return sum(c for _, c in self._samples) / span


class Backoff:
    """Exponential backoff with equal jitter: half the delay fixed, half random."""

    def __init__(self, *, base: float, cap: float, rng: Callable[[], float] = random.random):
        self.base = base
        self.cap = cap
        self.rng = rng
        self.attempt = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * 2.0**self.attempt)
        self.attempt = min(self.attempt + 1, 30)
        return delay / 2 + self.rng() * delay / 2

    def reset(self) -> None:
        self.attempt = 0


class KindWatcher:
    """Keeps the stored objects of one kind equal to the cluster's; see the module docstring."""

    def __init__(
        self,
        spec: KindSpec,
        *,
        client_factory: Callable[[], KubeClient],
        sink: Sink,
        stop: threading.Event,
        options: WatchOptions | None = None,
        lock_lost: threading.Event | None = None,
        discovery: Discovery | None = None,
    ) -> None:
        self.spec = spec
        self.kind = spec.kind
        self.client_factory = client_factory
        self.sink = sink
        self.stop = stop
        self.options = options or WatchOptions()
        self.lock_lost = lock_lost
        self.client: KubeClient | None = None
        self.version: str | None = None  # served version, None until discovered
        self.cursor = ""  # resourceVersion whose events are all committed
        self.need_list = True
        self.need_discovery = True
        # Shared with the cluster's other watchers (one read per document); dropped when this
        # watcher discovers again (a 404, its kind not served), as its documents may be stale.
        self.discovery = discovery or Discovery()
        self._discovered = False
        self.backoff = Backoff(base=self.options.backoff_base, cap=self.options.backoff_cap)
        self.rate = RateMeter()
        self.lists = 0  # relists done: tests and the benchmark read it
        self.cluster_uid = ""  # the cluster the stored objects come from, "" if unknown
        # None: not tried yet; False: the server has no watch lists (or they are off).
        self.watch_list: bool | None = None if self.options.watch_list else False
        self._last_beat = 0.0
        self._watch_started = 0.0
        self._stored_version = ""
        self._not_served_message: str | None = None
        self._identity_unknown_logged = False

    def run(self, *, deadline: float | None = None) -> None:
        """Watch until `stop` is set, `deadline` (monotonic) passes or ownership is lost."""
        stored = self.sink.open()
        # Taking the kind over is a heartbeat: fifteen watchers resuming at once each wrote
        # another one in their first quiet second, amid the backlog they were catching up.
        self._last_beat = time.monotonic()
        self.cursor = stored.resource_version
        self._stored_version = stored.served_version
        self.cluster_uid = stored.cluster_uid
        # Resuming needs a cursor the last run trusted and a known cluster to compare with.
        resumable = bool(self.cursor and stored.valid and stored.cluster_uid)
        self.need_list = self.options.list_on_start or not resumable
        try:
            while not self._should_stop(deadline):
                try:
                    self.step(deadline)
                    self.backoff.reset()
                except LostOwnership as exc:
                    log.warning("%s: %s; stopping", self.kind, exc)
                    return
                except ApiStatusError as exc:
                    self._on_status_error(exc)
                except Exception as exc:  # noqa: BLE001 - any failure: note it, wait, retry
                    self._fail(exc, self.backoff.next())
                finally:
                    self.sink.idle()
        finally:
            self.sink.close()

    def _should_stop(self, deadline: float | None) -> bool:
        return self.stop.is_set() or (deadline is not None and time.monotonic() >= deadline)

    def _on_status_error(self, exc: ApiStatusError) -> None:
        if exc.gone or exc.version_too_large:
            # The stored version is outside the server's history: relist and reconcile.
            log.info("%s: %s; relisting", self.kind, exc)
            self.need_list = True
            if exc.version_too_large:
                self.sink.cursor_invalid()
            return
        if exc.status == 404:
            self.need_discovery = True
        if exc.status == 429:
            delay = exc.retry_after if exc.retry_after is not None else self.backoff.next()
            self._fail(exc, delay + random.random() * min(delay * 0.1, 1.0))
            return
        self._fail(exc, self.backoff.next())

    def _fail(self, exc: BaseException, delay: float) -> None:
        message = f"{type(exc).__name__}: {exc}"
        log.warning("%s: %s (retrying in %.1fs)", self.kind, message, delay)
        self.sink.error(message)
        self.stop.wait(delay)

    def step(self, deadline: float | None = None) -> None:
        """One pass: discover, check the cluster, sync or prove the cursor, follow one watch."""
        if self.client is None:
            self.client = self.client_factory()
        if self.need_discovery or self.version is None:
            if self._discovered:
                self.discovery.invalidate()
            served = discover(self.client, [self.spec], documents=self.discovery)[self.kind]
            self._discovered = True
            if not served.served:
                self._not_served(served.message)
                return
            if served.version != self._stored_version:
                self.need_list = True
            self.version = served.version
            self.need_discovery = False
            self._not_served_message = None
        self.check_cluster()
        if self.need_list or not self.cursor:
            source = self.sync_state(deadline)
            self.watch_once(deadline, source=source)
            return
        if self.prove_cursor():
            self.watch_once(deadline)

    def check_cluster(self) -> None:
        """Drop the stored objects if another cluster answers now (kube-system uid changed)."""
        assert self.client is not None
        uid = self._cluster_identity()
        if not uid or uid == self.cluster_uid:
            return
        if self.cluster_uid:
            log.warning(
                "%s: the API server is another cluster now (kube-system uid %s, was %s); "
                "dropping the stored objects and listing again",
                self.kind,
                uid,
                self.cluster_uid,
            )
            self.sink.cluster_changed(uid)
            self.cursor = ""
            self.need_list = True
        else:
            # Never seen which cluster the cursor came from: it cannot be resumed.
            self.sink.cluster_seen(uid)
            self.need_list = True
        self.cluster_uid = uid

    def _cluster_identity(self) -> str:
        assert self.client is not None
        try:
            namespace = self.client.get(CLUSTER_IDENTITY_PATH)
        except ApiStatusError as exc:
            if exc.status not in (401, 403, 404):
                raise
            if exc.status == 404 and self.cluster_uid:
                # kube-system cannot be deleted: a server without it is a new cluster still
                # starting at the address. Resuming the cursor there would apply its objects
                # over the stored cluster's; wait (an error, retried) until it can be told.
                raise ClusterUnknown(
                    f"the API server has no kube-system namespace (another cluster starting "
                    f"at the address?); the stored objects are of cluster {self.cluster_uid}"
                ) from exc
            # Without `get` on namespaces (older RBAC) the cluster cannot be told apart;
            # the cursor check still catches a server that went back.
            if not self._identity_unknown_logged:
                log.warning("%s: cannot read the cluster identity: %s", self.kind, exc)
                self._identity_unknown_logged = True
            return ""
        meta = namespace.get("metadata") or {}
        return str(meta.get("uid") or "") if isinstance(meta, dict) else ""

    def prove_cursor(self) -> bool:
        """True when the server has reached the cursor; else mark it invalid and relist next.

        The server compares: a list of at most one object, not older than the cursor, is a
        504 "Too large resource version" when the server's data is older than the cursor.
        """
        assert self.client is not None and self.version is not None
        query: dict[str, str | int | bool] = {
            "limit": 1,
            "resourceVersion": self.cursor,
            "resourceVersionMatch": "NotOlderThan",
        }
        try:
            self.client.get(self.spec.path(self.version), query)
        except ApiStatusError as exc:
            if not exc.version_too_large:
                raise
            log.warning(
                "%s: the server is behind the stored resourceVersion %s (restored or "
                "recreated); listing again",
                self.kind,
                self.cursor,
            )
            self.sink.cursor_invalid()
            self.need_list = True
            return False
        self.sink.verified()
        self._last_beat = time.monotonic()
        return True

    def _not_served(self, message: str) -> None:
        if message != self._not_served_message:
            # Logged once per change: the poll below repeats every minute for ever.
            log.info("%s: %s", self.kind, message)
            self._not_served_message = message
        self.sink.not_served(message)
        self.version = None
        self._stored_version = ""
        self.cursor = ""
        self.need_list = True
        self.stop.wait(self.options.not_served_poll)

    def sync_state(self, deadline: float | None = None) -> StreamSource | None:
        """Make the database equal to the cluster; returns the watch list's stream, if any.

        A watch list's stream stays open, to be followed; where the server has no watch lists
        a paginated list does the work and there is no stream (None).
        """
        if self.watch_list is not False:
            try:
                return self.watch_list_sync(deadline)
            except WatchListUnsupported as exc:
                log.info("%s: %s; using list and watch", self.kind, exc)
                self.watch_list = False
            except ApiStatusError as exc:
                if exc.status == 429 or exc.gone or exc.version_too_large:
                    raise
                if exc.status in (400, 422):
                    # 422: the WatchList feature is off; 400: a server that predates it.
                    log.info("%s: no watch lists here (%s); using list and watch", self.kind, exc)
                    self.watch_list = False
                else:
                    # As client-go: any other failure (e.g. etcd without watch progress
                    # requests) falls back to a list this time; the next sync tries again.
                    log.info("%s: watch list failed (%s); listing instead", self.kind, exc)
        self.relist()
        return None

    def watch_list_sync(self, deadline: float | None = None) -> StreamSource | None:
        """Sync the whole state from a watch list; returns its stream, still open."""
        assert self.client is not None and self.version is not None
        path = self.spec.path(self.version)
        query: dict[str, str | int | bool] = {
            "watch": True,
            "sendInitialEvents": True,
            "allowWatchBookmarks": True,
            # No resourceVersion: the state is read consistently, at the latest version.
            "resourceVersionMatch": "NotOlderThan",
            "timeoutSeconds": self._timeout(deadline),
        }
        stream = self.client.watch(path, query, read_timeout=self.options.effective_read_timeout)
        source = StreamSource(stream, name=self.kind, initial=True)
        try:
            initial = initial_events(
                source,
                kind=self.kind,
                api_version=self.spec.api_version(self.version),
                path=path,
                idle_every=min(1.0, self.options.heartbeat_every),
                stop=lambda: self._should_stop(deadline),
            )
        except BaseException:
            source.close()
            raise
        if initial is None:
            source.close()
            return None
        self.watch_list = True
        try:
            count = initial.count
            listing = Listing(
                items=initial.take(),
                resource_version=initial.resource_version,
                pages=1,
                largest_page=count,
            )
            self._replace(listing)
        except BaseException:
            # A failed write (database down) must not leave the stream and its reader open.
            source.close()
            raise
        return source

    def relist(self) -> None:
        """List every object (paginated) and make the database equal to the list.

        Pages stream into the sink's replace, which fetches the next one as it writes (one
        page held here, not the list). A continue token that expires mid-list (410) aborts
        the replace, which leaves the stored objects as they were, and the list starts over.
        """
        assert self.client is not None and self.version is not None
        for attempt in range(self.options.list_attempts):
            listing = Listing(items=())
            listing.items = self._list_pages(listing)
            try:
                self._replace(listing)
                return
            except ApiStatusError as exc:
                if not exc.gone or listing.pages == 0 or attempt == self.options.list_attempts - 1:
                    raise
                log.info("%s: list continue expired, listing again", self.kind)

    def _replace(self, listing: Listing) -> None:
        assert self.version is not None
        self.sink.replace(listing, served_version=self.version, cluster_uid=self.cluster_uid)
        self._last_beat = time.monotonic()
        self.cursor = listing.resource_version
        self._stored_version = self.version
        self.need_list = False
        self.lists += 1
        log.info(
            "%s: listed at %s (%d page(s), at most %d objects each)",
            self.kind,
            listing.resource_version,
            listing.pages,
            listing.largest_page,
        )

    def _list_pages(self, listing: Listing) -> Iterator[JSON]:
        """The objects of a paginated list, a page fetched when the previous one is used up.

        Each object is handed over (its slot in the page emptied), so the page held here
        shrinks as the sink writes; the list's resourceVersion is set on `listing` at the end.
        """
        assert self.client is not None and self.version is not None
        path = self.spec.path(self.version)
        api_version = self.spec.api_version(self.version)
        token = ""
        while True:
            query: dict[str, str | int | bool] = {"limit": self.options.page_size}
            if token:
                query["continue"] = token
            page = self.client.get(path, query)
            items = page.get("items") or []
            meta = page.get("metadata") or {}
            del page
            listing.pages += 1
            listing.largest_page = max(listing.largest_page, len(items))
            for index, item in enumerate(items):
                items[index] = None
                if isinstance(item, dict):
                    # List items come without TypeMeta: the list's is theirs.
                    item.setdefault("kind", self.kind)
                    item.setdefault("apiVersion", api_version)
                    yield item
            token = str(meta.get("continue") or "")
            if not token:
                listing.resource_version = str(meta.get("resourceVersion") or "")
                return

    def _timeout(self, deadline: float | None) -> int:
        timeout = self.options.timeout_seconds
        if deadline is not None:
            timeout = max(1, min(timeout, int(deadline - time.monotonic()) + 1))
        return timeout

    def watch_once(
        self, deadline: float | None = None, *, source: StreamSource | None = None
    ) -> None:
        """Follow one watch connection from the cursor until it ends; commit batch by batch.

        `source` is a watch list's stream whose initial state is already stored.
        """
        assert self.client is not None and self.version is not None
        path = self.spec.path(self.version)
        if source is None:
            if self._should_stop(deadline):
                return
            query: dict[str, str | int | bool] = {
                "watch": True,
                "allowWatchBookmarks": True,
                "timeoutSeconds": self._timeout(deadline),
                "resourceVersion": self.cursor,
            }
            stream = self.client.watch(
                path, query, read_timeout=self.options.effective_read_timeout
            )
            source = StreamSource(stream, name=self.kind)
        self._watch_started = time.monotonic()
        try:
            batches = batch_events(
                source,
                kind=self.kind,
                api_version=self.spec.api_version(self.version),
                path=path,
                max_events=self.options.max_events,
                max_delay=self.options.max_delay,
                linger=self.options.linger,
                idle_every=min(1.0, self.options.heartbeat_every),
                stop=lambda: self._should_stop(deadline),
            )
            for batch in batches:
                if not batch.idle:
                    self.commit(batch)
                self._maybe_heartbeat()
        finally:
            source.close()

    def commit(self, batch: Batch) -> None:
        """Apply one batch and store its resourceVersion, in one transaction."""
        rate = self.rate.add(len(batch.events))
        self.sink.apply(
            batch.events, resource_version=batch.resource_version or self.cursor, rate=rate
        )
        if batch.resource_version:
            self.cursor = batch.resource_version
        self._last_beat = time.monotonic()

    def _maybe_heartbeat(self) -> None:
        if self.lock_lost is not None and self.lock_lost.is_set():
            raise LostOwnership(f"{self.kind}: the watcher lock expired or was taken")
        now = time.monotonic()
        if self.backoff.attempt and now - self._watch_started >= self.options.healthy_after:
            self.backoff.reset()
        if now - self._last_beat < self.options.heartbeat_every:
            return
        self.sink.bookmark(rate=self.rate.add(0))
        self._last_beat = time.monotonic()
