"""The one-pass inner loop of a watch: events in, batches to commit out. No Django, no I/O.

`batch_events` reads decoded watch events from an `EventSource` and groups them into batches of
at most `max_events` events or `max_delay` seconds, each carrying the resourceVersion to store
once the batch is committed: the version of its last event, or of a later bookmark. An ERROR
event ends the pass by raising the ApiStatusError it carries (410 means relist), after the
events before it were handed out.

`initial_events` reads the start of a watch list (`sendInitialEvents=true`): the ADDED events of
every object, up to the bookmark annotated `k8s.io/initial-events-end`, which carries the
resourceVersion the state stands for. A server that ignores the parameter shows it by sending
anything else first; that is `WatchListUnsupported`, and the caller lists instead. Those ADDED
events are held as the lines the server wrote (`HeldLines`), decoded once, when taken.
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

from dralib.kube.client import (
    KubeError,
    TransportError,
    WatchStream,
    decode_event,
    error_from_watch_status,
)

log = logging.getLogger(__name__)

JSON = dict[str, Any]
CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# How kube-apiserver starts an ADDED event's line (Go's encoding/json writes metav1.WatchEvent's
# fields in order, compact): such a line is held as it is, undecoded. A line written otherwise
# is decoded to learn what it is, and held as it is if ADDED.
ADDED_LINE_START = b'{"type":"ADDED","object":{'
# Held lines are compressed this many bytes at a time: an object's JSON repeats much of the
# previous one's (the demo's objects: 1,674 bytes a line on average, 591 compressed one by one,
# 166 in blocks), and compressing a block costs a quarter of compressing its objects one by one.
HOLD_BLOCK_BYTES = 64 * 1024
# Events in one batch at most. A batch's fixed cost (transaction, cursor and state rows, the
# kind's per-batch queries, the live publish) was most of a backlog's: catching up 4,300 Events
# in batches of 200 took 22 commits and ~13 ms of the process's CPU each beyond the rows'
# (ingest at 1,000 nodes: ~3,900 events/s; in batches of 1,000, ~6,500). Steady traffic never
# fills one: `max_delay` ends a batch first, so this bounds only a backlog's batches.
MAX_BATCH_EVENTS = 1000


class WatchListUnsupported(KubeError):
    """The server answered a watch list as a plain watch: it has no watch lists; list instead."""


class HeldLines:
    """Event lines held in order, compressed a block of HOLD_BLOCK_BYTES at a time.

    At most one block is held uncompressed, the one being filled; a small state (under a
    block) is never compressed at all.
    """

    def __init__(self, *, block_bytes: int = HOLD_BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes
        self.blocks: list[bytes] = []
        self.count = 0
        self._open: list[bytes] = []
        self._open_bytes = 0

    def append(self, line: bytes) -> None:
        self._open.append(line)
        self._open_bytes += len(line) + 1
        self.count += 1
        if self._open_bytes >= self.block_bytes:
            self.blocks.append(b"z" + zlib.compress(b"\n".join(self._open), 1))
            self._open, self._open_bytes = [], 0

    @property
    def held_bytes(self) -> int:
        """Bytes held: compressed blocks and the lines of the open one."""
        return sum(len(block) for block in self.blocks) + self._open_bytes

    def take(self) -> Iterator[bytes]:
        """The lines in order; each block is let go of once its lines are handed out."""
        if self._open:
            # The open block joins the others as it is: a lone block is never compressed.
            self.blocks.append(b"r" + b"\n".join(self._open))
            self._open, self._open_bytes = [], 0
        blocks, self.blocks = self.blocks, []
        self.count = 0
        blocks.reverse()
        while blocks:
            block = blocks.pop()
            text = zlib.decompress(block[1:]) if block[:1] == b"z" else block[1:]
            del block
            yield from text.split(b"\n")


@dataclass
class InitialState:
    """The objects a watch list started with and the resourceVersion they stand for.

    The objects arrive before the bookmark that says the state is whole, and only then may
    they replace what is stored; until then each is held as the line it came in (`HeldLines`),
    compressed with its neighbours, and decoded once, as `take` hands it out.
    """

    held: HeldLines
    resource_version: str
    kind: str
    api_version: str
    path: str

    @property
    def count(self) -> int:
        """Objects held (none once taken)."""
        return self.held.count

    def take(self) -> Iterator[JSON]:
        """The objects one at a time, decoded here; the hold is emptied as they go."""
        for line in self.held.take():
            event = decode_event(line, path=self.path)
            obj = event.get("object")
            # Lines are held on their first bytes: the rest must agree, or they were not JSON
            # of a watch event after all.
            if event.get("type") != "ADDED" or not isinstance(obj, dict):
                raise TransportError(f"watch list {self.path} sent a malformed ADDED event")
            # Real servers send TypeMeta on watch objects; fill it in for those that do not.
            obj.setdefault("kind", self.kind)
            obj.setdefault("apiVersion", self.api_version)
            yield obj


def encode_event(event: JSON) -> bytes:
    """An event as a line, compact as an API server writes it (for sources given objects).

    orjson refuses integers past 64 bits: such an event is written by the standard library.
    """
    try:
        return orjson.dumps(event)
    except TypeError:
        return json.dumps(event, separators=(",", ":")).encode()


class Signal(enum.Enum):
    """What an EventSource returns instead of an event."""

    IDLE = "idle"  # nothing arrived within the timeout
    END = "end"  # the stream ended cleanly (server timeout, close)


class EventSource(Protocol):
    """Decoded watch events, one at a time, waiting at most `timeout` seconds for the next."""

    def next_event(self, timeout: float) -> JSON | Signal: ...


class LineSource(EventSource, Protocol):
    """An EventSource that also gives each event as the line it came in, for a reader that
    holds events undecoded (`initial_events`)."""

    def next_line(self, timeout: float) -> bytes | Signal: ...


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
    """An EventSource over a list: events (decoded or as lines), None for a quiet moment, then
    END."""

    def __init__(self, items: Iterable[JSON | bytes | None], *, path: str = "canned") -> None:
        self._items = iter(items)
        self._path = path

    def _next(self) -> JSON | bytes | Signal:
        item = next(self._items, Signal.END)
        return Signal.IDLE if item is None else item

    def next_event(self, timeout: float) -> JSON | Signal:
        item = self._next()
        return decode_event(item, path=self._path) if isinstance(item, bytes) else item

    def next_line(self, timeout: float) -> bytes | Signal:
        item = self._next()
        return encode_event(item) if isinstance(item, dict) else item


class StreamSource:
    """An EventSource reading a WatchStream on its own thread, so waiting can time out.

    The thread decodes each event, except, with `initial`, the ADDED events that start a watch
    list and the event after them: those lines are queued as they came, for `initial_events`,
    which holds the ADDED ones undecoded.
    """

    def __init__(
        self, stream: WatchStream, *, name: str, max_queued: int = 5000, initial: bool = False
    ) -> None:
        self._stream = stream
        self._initial = initial
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max_queued)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name=f"watch-read:{name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        initial = self._initial
        try:
            for line in self._stream.lines():
                if initial:
                    # The first other event ends the initial state; initial_events decodes it.
                    initial = line.startswith(ADDED_LINE_START)
                    item: tuple[str, Any] = ("line", line)
                else:
                    item = ("event", decode_event(line, path=self._stream.path))
                if not self._put(item):
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

    def _next(self, timeout: float) -> tuple[str, Any] | Signal:
        try:
            tag, value = self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return Signal.IDLE
        if tag == "end":
            return Signal.END
        if tag == "error":
            raise value
        return tag, value

    def next_event(self, timeout: float) -> JSON | Signal:
        item = self._next(timeout)
        if isinstance(item, Signal):
            return item
        tag, value = item
        event: JSON = decode_event(value, path=self._stream.path) if tag == "line" else value
        return event

    def next_line(self, timeout: float) -> bytes | Signal:
        item = self._next(timeout)
        if isinstance(item, Signal):
            return item
        tag, value = item
        line: bytes = value if tag == "line" else encode_event(value)
        return line

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
    max_events: int = MAX_BATCH_EVENTS,
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
    source: LineSource,
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
    held = HeldLines()
    while not stop():
        line = source.next_line(idle_every)
        if line is Signal.IDLE:
            continue
        if line is Signal.END:
            raise TransportError(f"watch list {path} ended before its initial-events-end bookmark")
        assert isinstance(line, bytes)
        if line.startswith(ADDED_LINE_START):
            held.append(line)
            continue
        item = decode_event(line, path=path)
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
                return InitialState(held, version, kind=kind, api_version=api_version, path=path)
            raise WatchListUnsupported(f"watch {path} sent a bookmark before the initial state")
        if event_type != "ADDED":
            raise WatchListUnsupported(f"watch {path} sent {event_type} before the initial state")
        # An ADDED event written otherwise than kube-apiserver writes it (spacing, key order).
        held.append(line)
    return None
