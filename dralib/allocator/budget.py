"""A time budget and cancellation for the search, checked every few thousand steps.

The backtracking search is exponential in the worst case (requests that cannot all be met over
many interchangeable devices try every combination), so a caller serving a person or a queue
gives it a deadline and/or a `cancelled()` callable. The deadline is a value of the watch's
`clock`: `time.monotonic()` by default (wall time), or `time.thread_time()` for a budget in CPU
time of the searching thread, which other work on the machine does not use up, so the same
question gets the same answer however loaded the machine is. `SearchWatch` is consulted by the
search loop only every `CHECK_EVERY` steps, so an unbounded search pays nothing measurable for
it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dralib.allocator.types import AllocationTimeout

__all__ = ["CHECK_EVERY", "SearchWatch"]

# A power of two, so the search tests it with a mask; a step costs roughly a microsecond, so
# this checks about every millisecond.
CHECK_EVERY = 1024


class SearchWatch:
    """Raises AllocationTimeout once `clock()` passed the deadline or `cancelled()` says so."""

    __slots__ = ("cancelled", "claims_total", "clock", "deadline", "started")

    def __init__(
        self,
        *,
        deadline: float | None,
        cancelled: Callable[[], bool] | None,
        claims_total: int,
        started: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.deadline = deadline
        self.cancelled = cancelled
        self.claims_total = claims_total
        # Looked up when the watch is made, so a test's clock in place of `time` is the one read.
        self.clock = clock or time.monotonic
        # Read at the first check (the search's start) unless given: a watch is made per node,
        # and a CPU clock read costs a system call (5-35 us here), twice per node otherwise.
        self.started = started

    def check(self, *, steps: int, claim_index: int) -> None:
        """Stop the search (raise) if it is out of time or no longer wanted."""
        now = self.clock()
        if self.started is None:
            self.started = now
        gave_up = self.deadline is not None and now >= self.deadline
        cancelled = not gave_up and self.cancelled is not None and self.cancelled()
        if gave_up or cancelled:
            raise AllocationTimeout(
                elapsed=now - self.started,
                steps=steps,
                claim_index=claim_index,
                claims_total=self.claims_total,
                cancelled=cancelled,
            )
