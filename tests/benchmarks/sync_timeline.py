"""Where one kind's watcher spends each batch (bench_sync.py --timeline KIND): a script's aid.

Wraps the steps of a batch on the watcher's thread (the caller's thread only) and prints, per
ingest run, the sum over batches of each step's wall time and of the thread's CPU time:
`receive` is the time between two commits (waiting for the stream, for events the reader
thread decoded); `normalize+columns` the writer's queueing of objects; `stored rows` the read
of what is stored; `write` the INSERT/UPDATE/DELETE statements; `written hook` the kind's
after-write step (events: bounds and TTL); `state row` the cursor's row; `commit` the
transaction's end; `publish` the live publish. Wall minus CPU is waiting (database, GIL).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import is_dataclass
from typing import Any

from django.db import transaction

from inventory.sync import batches, bulk
from inventory.sync.watch import loop as watch_loop
from inventory.sync.watch import state, store

_local = threading.local()


class Timeline:
    """Per-step sums of wall and thread CPU time for the batches of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.batches = 0
        self.events = 0
        self._last_end: tuple[float, float] | None = None
        self.first_apply = 0.0
        self.marks: dict[str, float] = {}
        self.thread_name = ""
        self._undo: list[Callable[[], None]] = []

    def _add(self, step: str, wall: float, cpu: float) -> None:
        self.wall[step] += wall
        self.cpu[step] += cpu

    def _timed(self, owner: Any, name: str, step: str) -> None:
        original = getattr(owner, name)
        timeline = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not getattr(_local, "on", False):
                return original(*args, **kwargs)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                timeline._add(step, time.perf_counter() - wall, time.thread_time() - cpu)

        # A handler is a frozen dataclass: set around its __setattr__.
        setter = object.__setattr__ if is_dataclass(owner) else setattr
        setter(owner, name, timed)
        self._undo.append(lambda: setter(owner, name, original))

    def _marked(self, owner: Any, name: str, mark: str) -> None:
        """Note when the kind's watcher first returned from `owner.name` (its start-up)."""
        original = getattr(owner, name)
        timeline = self

        def marked(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                mine = threading.current_thread().name == timeline.thread_name
                if mine and mark not in timeline.marks:
                    timeline.marks[mark] = time.perf_counter()

        setattr(owner, name, marked)
        self._undo.append(lambda: setattr(owner, name, original))

    def install(self) -> None:
        original_run = watch_loop.KindWatcher.run
        timeline = self

        def run(watcher: Any, **kwargs: Any) -> None:
            if watcher.kind == timeline.kind:
                timeline.thread_name = threading.current_thread().name
                timeline.marks["watcher made"] = time.perf_counter()
            original_run(watcher, **kwargs)

        watch_loop.KindWatcher.run = run  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(watch_loop.KindWatcher, "run", original_run))
        self._marked(store.DatabaseSink, "open", "sink opened")
        self._marked(watch_loop, "discover", "discovered")
        self._marked(watch_loop.KindWatcher, "check_cluster", "cluster checked")
        self._marked(watch_loop.KindWatcher, "prove_cursor", "cursor proved")
        self._marked(watch_loop, "StreamSource", "watch opened")
        original_apply = store.DatabaseSink.apply
        timeline = self

        def apply(sink: Any, events: list[Any], **kwargs: Any) -> None:
            if sink.kind != timeline.kind:
                return original_apply(sink, events, **kwargs)
            wall, cpu = time.perf_counter(), time.thread_time()
            if not timeline.first_apply:
                timeline.first_apply = wall
            if timeline._last_end is not None:
                timeline._add("receive", wall - timeline._last_end[0], cpu - timeline._last_end[1])
            _local.on = True
            try:
                return original_apply(sink, events, **kwargs)
            finally:
                _local.on = False
                end_wall, end_cpu = time.perf_counter(), time.thread_time()
                timeline._add("apply (all)", end_wall - wall, end_cpu - cpu)
                timeline._last_end = (end_wall, end_cpu)
                timeline.batches += 1
                timeline.events += len(events)

        store.DatabaseSink.apply = apply  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(store.DatabaseSink, "apply", original_apply))
        self._timed(bulk.BatchWriter, "upsert", "normalize+columns")
        self._timed(bulk, "_load_stored", "stored rows")
        self._timed(bulk, "insert_rows", "write")
        self._timed(bulk, "update_rows", "write")
        self._timed(bulk, "_remove", "write")
        handler = batches.handler_for(self.kind)
        if handler.written is not None:
            self._timed(handler, "written", "written hook")
        self._timed(state, "record_batch", "state row")
        self._timed(batches, "_publish", "publish")
        original_commit = transaction.Atomic.__exit__

        def commit(atomic: Any, *exc: Any) -> Any:
            # Savepoint releases and the sink's commit (its block ends after apply_events).
            if not getattr(_local, "on", False):
                return original_commit(atomic, *exc)
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original_commit(atomic, *exc)
            finally:
                self._add("atomic exits", time.perf_counter() - wall, time.thread_time() - cpu)

        transaction.Atomic.__exit__ = commit  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(transaction.Atomic, "__exit__", original_commit))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def report(self, started: float) -> str:
        """The sums; `started` is the perf_counter time the watchers started."""
        lines = [
            f"  timeline of {self.kind}: {self.batches} batches, {self.events} events, first "
            f"batch {self.first_apply - started:.2f}s after the watchers started"
        ]
        if self.marks:
            lines.append(
                "    start-up: "
                + ", ".join(
                    f"{mark} {at - started:.2f}s"
                    for mark, at in sorted(self.marks.items(), key=lambda item: item[1])
                )
            )
        for step, wall in sorted(self.wall.items(), key=lambda item: -item[1]):
            lines.append(f"    {step:<20} wall {wall:6.2f}s  thread CPU {self.cpu[step]:6.2f}s")
        return "\n".join(lines)
