"""The one-pass inner generator, fed canned events: batching, versions, bookmarks, errors."""

from __future__ import annotations

import itertools

import pytest

from dralib.kube.client import ApiStatusError
from inventory.sync.watch import CannedSource, WatchOptions, batch_events


def event(kind: str, name: str, rv: int) -> dict:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": str(rv)}}}


def run(items: list, **kwargs) -> list:
    ticks = itertools.count()
    options = {"kind": "Node", "api_version": "v1", "path": "/api/v1/nodes", "max_delay": 10.0}
    options.update(kwargs)
    return list(batch_events(CannedSource(items), clock=lambda: next(ticks) * 0.0, **options))


def test_batches_hold_at_most_max_events_and_carry_the_last_version() -> None:
    """Five events with max_events=2 become batches of 2, 2, 1 with their last versions."""
    items = [event("ADDED", f"n{i}", 10 + i) for i in range(5)]
    batches = run(items, max_events=2)
    assert [len(b.events) for b in batches] == [2, 2, 1]
    assert [b.resource_version for b in batches] == ["11", "13", "14"]


def test_events_get_type_meta_when_missing() -> None:
    """Objects without kind/apiVersion get the watched kind's."""
    (batch,) = run([event("MODIFIED", "n1", 5)])
    _, obj = batch.events[0]
    assert (obj["kind"], obj["apiVersion"]) == ("Node", "v1")


def test_a_quiet_moment_flushes_pending_events() -> None:
    """An idle tick commits what is pending even below max_events."""
    batches = run([event("ADDED", "a", 1), None, event("ADDED", "b", 2)], max_events=100)
    assert [[o["metadata"]["name"] for _, o in b.events] for b in batches] == [["a"], ["b"]]


def test_bookmarks_advance_the_version_without_events() -> None:
    """A bookmark alone yields a batch with no events and the bookmark's version."""
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "77"}}}
    batches = run([event("ADDED", "a", 5), None, bookmark, None])
    assert [(len(b.events), b.resource_version) for b in batches] == [(1, "5"), (0, "77")]
    assert not batches[1].idle


def test_idle_ticks_without_news_yield_idle_batches() -> None:
    """Quiet moments with nothing new give idle batches the caller only heartbeats on."""
    batches = run([None, None])
    assert [b.idle for b in batches] == [True, True]


def test_error_410_flushes_earlier_events_then_raises_gone() -> None:
    """Events before an ERROR 410 are handed out; then the pass ends with a Gone error."""
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    seen = []
    with pytest.raises(ApiStatusError) as caught:
        for batch in batch_events(
            CannedSource([event("ADDED", "a", 3), gone, event("ADDED", "b", 4)]),
            kind="Node",
            api_version="v1",
            path="/api/v1/nodes",
            max_delay=10.0,
        ):
            seen.append(batch.resource_version)
    assert caught.value.gone
    assert seen == ["3"]


def test_stop_ends_the_pass_after_the_current_batch() -> None:
    """Once stop() is true, no batch after the current one is produced."""
    items = [event("ADDED", f"n{i}", i) for i in range(6)]
    batches = []
    for batch in batch_events(
        CannedSource(items),
        kind="Node",
        api_version="v1",
        path="/api/v1/nodes",
        max_events=2,
        max_delay=10.0,
        stop=lambda: len(batches) >= 1,
    ):
        batches.append(batch)
    assert [b.resource_version for b in batches] == ["1"]


def test_unknown_event_types_and_objectless_events_are_ignored() -> None:
    """Garbage event types do not end the stream; the next good event arrives."""
    items = [{"type": "WEIRD", "object": {}}, {"type": "ADDED"}, event("ADDED", "ok", 9)]
    (batch,) = run(items)
    assert [o["metadata"]["name"] for _, o in batch.events] == ["ok"]


class TimedSource:
    """Events arriving at given times on a fake clock; a wait shorter than the next arrival
    returns IDLE having used up its timeout, as a queue.get with a timeout does."""

    def __init__(self, arrivals: list[tuple[float, dict]]) -> None:
        self.now = 0.0
        self.arrivals = list(arrivals)

    def clock(self) -> float:
        return self.now

    def next_event(self, timeout: float):
        from inventory.sync.watch.events import Signal

        if not self.arrivals:
            return Signal.END
        at, item = self.arrivals[0]
        if at <= self.now + timeout:
            self.now = max(self.now, at)
            self.arrivals.pop(0)
            return item
        self.now += timeout
        return Signal.IDLE


def timed_batches(arrivals: list[tuple[float, dict]], **kwargs) -> list[list[str]]:
    source = TimedSource(arrivals)
    options = {"kind": "Node", "api_version": "v1", "path": "/api/v1/nodes", "max_delay": 0.1}
    options.update(kwargs)
    batches = batch_events(source, clock=source.clock, **options)
    return [[o["metadata"]["name"] for _, o in b.events] for b in batches if b.events]


def test_linger_commits_a_lone_change_once_the_stream_is_quiet() -> None:
    """A burst followed by a pause is one batch at once, not after max_delay; without linger
    the late event waits in the same batch."""
    arrivals = [(0.0, event("ADDED", "a", 1)), (0.001, event("ADDED", "b", 2))]
    arrivals += [(0.002, event("ADDED", "c", 3)), (0.05, event("MODIFIED", "a", 4))]
    assert timed_batches(arrivals, linger=0.005) == [["a", "b", "c"], ["a"]]
    assert timed_batches(arrivals) == [["a", "b", "c", "a"]]


def test_linger_still_fills_batches_from_a_backlog() -> None:
    """Events 1 ms apart (a backlog) fill batches to max_events despite a 5 ms linger."""
    arrivals = [(i * 0.001, event("ADDED", f"n{i}", i + 1)) for i in range(10)]
    batches = timed_batches(arrivals, linger=0.005, max_events=4)
    assert [len(b) for b in batches] == [4, 4, 2]


def test_a_backlog_commits_in_batches_of_a_thousand_by_default() -> None:
    """A watcher's default options turn a backlog of 2,500 queued events into three batches:
    each batch's fixed cost (transaction, cursor, per-batch queries) is paid per thousand."""
    options = WatchOptions()
    items = [event("MODIFIED", f"n{i}", i + 1) for i in range(2500)]
    batches = run(items, max_events=options.max_events, max_delay=options.max_delay)
    assert [len(b.events) for b in batches] == [1000, 1000, 500]
    assert batch_events.__kwdefaults__["max_events"] == options.max_events
