"""A clock that moves only when it is read, for proving time budgets by counting.

A search with a budget reads its clock (`time.thread_time()` for what-if's CPU budgets,
`time.monotonic()` for the CLI's timeout) when it starts and at every check (every
`CHECK_EVERY` steps). With this clock in place of the modules' `time`, each reading is `tick`
seconds after the one before, so "stops at its budget" becomes "stops after budget / tick
readings", whatever the machine's load.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest


class TickingClock:
    """Stands in for the `time` module: `monotonic()` advances `tick` per call, the rest is real."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.now = 1000.0
        self.readings = 0

    def monotonic(self) -> float:
        self.readings += 1
        self.now += self.tick
        return self.now

    # What-if budgets are CPU time of the searching thread: the same ticking readings.
    thread_time = monotonic

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def install(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, tick: float) -> TickingClock:
    """Give `modules` (which `import time`) a ticking clock for the rest of the test."""
    clock = TickingClock(tick)
    for module in modules:
        monkeypatch.setattr(module, "time", clock)
    return clock
