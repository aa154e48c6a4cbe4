"""The one-pass inner loop of a watch: events in, batches to commit out. No Django, no I/O.

`batch_events` reads decoded watch events from an `EventSource` and groups them into batches of
at most `max_events` events or `max_delay` seconds, each carrying the resourceVersion to store
once the batch is committed: the version of its last event, or of a later bookmark. An ERROR
event ends the pass by raising the ApiStatusError it carries (410 means relist), after the
events before it were handed out.

`initial_events` reads the start of a watch list (`sendInitialEvents=true`): the ADDED events of
every object, up to the bookmark annotated `k8s.io/initial-events-end`, which carries the
resourceVersion the state stands for. A server that ignores the parameter shows it by sending
anything else first; that is `WatchListUnsupported`, and the caller lists instead.
"""

from __future__ import annotations

import enum
import json
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from dralib.kube.client import KubeError, TransportError, WatchStream, error_from_watch_status

log = logging.getLogger(__name__)

JSON = dict[str, Any]
CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class WatchListUnsupported(KubeError):
    """The server answered a watch list as a plain watch: it has no watch lists; list instead."""


@dataclass
class InitialState:
    """The objects a watch list started with and the resourceVersion they stand for.

    The objects arrive before the bookmark that says the state is whole, and only then may
    they replace what is stored; until then each is held as compressed JSON (`pack`): a demo
    pod's 1.3 KB of JSON in about 550 bytes, where its Python values take several KB.
    """

    packed: list[bytes]
    resource_version: str

    @property
    def items(self) -> list[JSON]:
        """Every object, unpacked (for small states and tests; `take` streams them)."""
        return [unpack(entry) for entry in self.packed]

    def take(self) -> Iterator[JSON]:
        """The objects one at a time, each let go of here once handed out."""
        packed, self.packed = self.packed, []
        packed.reverse()
        while packed:
            yield unpack(packed.pop())


def pack(obj: JSON) -> bytes:
    """An object as JSON compressed at zlib's fastest level (objects of a kind repeat a lot).

    orjson reads an integer past 64 bits as a float: such an object is written and read back
    by the standard library instead (the first byte says which).
    """
    try:
        return b"o" + zlib.compress(orjson.dumps(obj), 1)
    except TypeError:
        return b"j" + zlib.compress(json.dumps(obj).encode(), 1)


def unpack(entry: bytes) -> JSON:
    text = zlib.decompress(entry[1:])
    value: JSON = orjson.loads(text) if entry[:1] == b"o" else json.loads(text)
    return value


class Signal(enum.Enum):
    """What an EventSource returns instead of an event."""

    IDLE = "idle"  # nothing arrived within the timeout
    END = "end"  # the stream ended cleanly (server timeout, close)


class EventSource(Protocol):
    """Decoded watch events, one at a time, waiting at most `timeout` seconds for the next."""

    def next_event(self, timeout: float) -> JSON | Signal: ...


@dataclass
class Batch:
    """Events to apply in one transaction and the resourceVersion to store with them."""

    events: list[tuple[str, JSON]] = field(default_factory=list)
    resource_version: str = ""
    bookmarks: int = 0

    @property
    def idle(self) -> bool:
        """Nothing to commit: no events and no newer version."""
        return not self.events and not self.bookmarks


class CannedSource:
    """An EventSource over a list: events as given, None for a quiet moment, then END."""

    def __init__(self, items: Iterable[JSON | None]) -> None:
        self._items = iter(items)

    def next_event(self, timeout: float) -> JSON | Signal:
        item = next(self._items, Signal.END)
        return Signal.IDLE if item is None else item


class StreamSource:
    """An EventSource reading a WatchStream on its own thread, so waiting can time out."""

    def __init__(self, stream: WatchStream, *, name: str, max_queued: int = 5000) -> None:
        self._stream = stream
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max_queued)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name=f"watch-read:{name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for event in self._stream:
                if not self._put(("event", event)):
                    return
            self._put(("end", None))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which decides
            self._put(("error", exc))

    def _put(self, item: tuple[str, Any]) -> bool:
        # A bounded queue keeps memory flat when the database is slower than the stream.
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def next_event(self, timeout: float) -> JSON | Signal:
        try:
            tag, value = self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return Signal.IDLE
        if tag == "end":
            return Signal.END
        if tag == "error":
            raise value
        event: JSON = value
        return event

    def close(self) -> None:
        self._closed.set()
        self._stream.close()
        self._thread.join(timeout=5)


def batch_events(
    source: EventSource,
    *,
    kind: str,
    api_version: str,
    path: str,
    max_events: int = 200,
    max_delay: float = 0.1,
    linger: float | None = None,
    idle_every: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Batch]:
    """Group the events of one watch connection into batches; see the module docstring.

    With `linger`, a batch also ends when no event followed its last one within `linger`
    seconds: a lone change commits at once, while a backlog, whose events follow each other
    closely, still fills batches up to `max_events` (group commit).

    Also yields an idle Batch (nothing to commit) after `idle_every` quiet seconds, so the
    caller can heartbeat. Stops after the current batch once `stop()` is true.
    """
    pending = Batch()
    committed_version = ""
    first_at = 0.0
    last_at = 0.0

    def flush() -> Batch:
        nonlocal pending, committed_version
        done, pending = pending, Batch(resource_version=pending.resource_version)
        committed_version = done.resource_version
        return done

    while True:
        if stop():
            if not pending.idle:
                yield flush()
            return
        if pending.idle:
            timeout = idle_every
        else:
            until = first_at + max_delay
            if linger is not None:
                until = min(until, last_at + linger)
            timeout = max(until - clock(), 0.0)
        item = source.next_event(timeout)
        if item is Signal.END:
            if not pending.idle:
                yield flush()
            return
        if item is Signal.IDLE:
            yield flush() if not pending.idle else Batch(resource_version=committed_version)
            continue
        assert isinstance(item, dict)
        event_type = item.get("type")
        obj = item.get("object")
        if event_type == "ERROR":
            if not pending.idle:
                yield flush()
            raise error_from_watch_status(obj if isinstance(obj, dict) else {}, path=path)
        if not isinstance(obj, dict):
            log.warning("watch %s: %s event without an object, ignored", path, event_type)
            continue
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if event_type == "BOOKMARK":
            if isinstance(version, str) and version:
                last_at = clock()
                if pending.idle:
                    first_at = last_at
                pending.resource_version = version
                pending.bookmarks += 1
            continue
        if event_type not in CHANGE_TYPES:
            log.warning("watch %s: unknown event type %r, ignored", path, event_type)
            continue
        # Real servers send TypeMeta on watch objects; fill it in for those that do not.
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", api_version)
        last_at = clock()
        if pending.idle:
            first_at = last_at
        pending.events.append((str(event_type), obj))
        if isinstance(version, str) and version:
            pending.resource_version = version
        if len(pending.events) >= max_events or last_at - first_at >= max_delay:
            yield flush()


def initial_events(
    source: EventSource,
    *,
    kind: str,
    api_version: str,
    path: str,
    idle_every: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
) -> InitialState | None:
    """The initial state a watch list sends, up to its initial-events-end bookmark.

    None when `stop()` turned true first. Raises WatchListUnsupported when the server sends
    anything but ADDED events before that bookmark, the ApiStatusError of an ERROR event, and
    TransportError when the stream ends before the bookmark (retry, it may be a cut).
    """
    items: list[bytes] = []
    while not stop():
        item = source.next_event(idle_every)
        if item is Signal.IDLE:
            continue
        if item is Signal.END:
            raise TransportError(f"watch list {path} ended before its initial-events-end bookmark")
        assert isinstance(item, dict)
        event_type = item.get("type")
        obj = item.get("object")
        if event_type == "ERROR":
            raise error_from_watch_status(obj if isinstance(obj, dict) else {}, path=path)
        if not isinstance(obj, dict):
            log.warning("watch list %s: %s event without an object, ignored", path, event_type)
            continue
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        if event_type == "BOOKMARK":
            annotations = meta.get("annotations") or {}
            version = meta.get("resourceVersion")
            if annotations.get(INITIAL_EVENTS_END) == "true" and isinstance(version, str):
                return InitialState(items, version)
            raise WatchListUnsupported(f"watch {path} sent a bookmark before the initial state")
        if event_type != "ADDED":
            raise WatchListUnsupported(f"watch {path} sent {event_type} before the initial state")
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", api_version)
        items.append(pack(obj))
    return None
