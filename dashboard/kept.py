"""A value computed from the database and kept in process memory under the fingerprint of its
inputs, computed by one thread at a time.

The class membership, the pool counts and the leaks each take seconds to compute from scratch
at 5,000 nodes and are asked for by every page and scrape: they are kept until a small query
says their inputs moved (the fingerprint), and then brought up to date from the value kept
before (which is why `compute` receives it). Requests that arrive while one computes wait for
it rather than repeat it; a reader that must not wait (a scrape during the warm-up) takes
`last()`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from dashboard.gcpause import gc_paused

__all__ = ["Kept"]

T = TypeVar("T")


class Kept(Generic[T]):
    """One kept value and the fingerprint it was computed for."""

    _every: weakref.WeakSet[Kept[Any]] = weakref.WeakSet()

    def __init__(self, *, pause_gc: bool = False) -> None:
        # pause_gc: the computation decodes so many rows (a hundred thousand devices) that the
        # collector's full passes over them would cost as much again.
        self._pause_gc = pause_gc
        self._lock = threading.Lock()
        self._entry: tuple[Any, T] | None = None
        Kept._every.add(self)

    def get(self, fingerprint: Any, compute: Callable[[T | None], T]) -> T:
        """The value for `fingerprint`: the kept one when it was computed for it, else
        `compute(previous kept value or None)`, kept."""
        entry = self._entry
        if entry is not None and entry[0] == fingerprint:
            return entry[1]
        with self._lock:
            entry = self._entry
            if entry is not None and entry[0] == fingerprint:
                return entry[1]
            previous = None if entry is None else entry[1]
            if self._pause_gc:
                with gc_paused():
                    value = compute(previous)
            else:
                value = compute(previous)
            self._entry = (fingerprint, value)
            return value

    def last(self) -> T | None:
        """The value last kept, whatever moved since (None before the first computation)."""
        entry = self._entry
        return None if entry is None else entry[1]

    def forget(self) -> None:
        """Drop the kept value: the next `get` computes from scratch."""
        with self._lock:
            self._entry = None

    @classmethod
    def forget_every(cls) -> None:
        """Drop every kept value in the process: what runs next starts as a new process would
        (the test suite's fixture, so that no test depends on what an earlier one kept)."""
        for kept in list(cls._every):
            kept.forget()
