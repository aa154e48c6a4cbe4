"""Workers adopt the watchers themselves: the watch leases, which are free, and who checks.

A lease is a watcher lock (`inventory.locks`) named after what its watcher watches. There is one
cluster today, "default", with one lease per kind named after the kind (`Node`): the key workers
before this module already took, so during a rolling upgrade old and new workers contend for the
same key and never watch a kind twice. Another cluster's leases will be named `<cluster>/<kind>`.

Every Celery worker that consumes the watch queue runs a `LeaseSupervisor` thread: at once when
the worker is ready, then every half lease (with jitter, so workers started together do not check
together), it queues a watcher for every lease nobody holds. So one worker alone fills the database
without beat. A lease that a live holder renews (every third of the lease) never has less than two
thirds left; one with less than the time to the next check is dying, so the supervisor checks
again just after it expires: a worker killed with -9 has its kinds taken over within the lease
plus a second or so, not plus a check period. Before queueing, a worker takes a short "queued"
marker for the lease with SET NX, so of the workers that notice the same free lease one queues a
watcher; the lease itself, taken NX by the watcher, is what keeps a kind to one watcher.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from inventory.choices import DEFAULT_CLUSTER
from inventory.locks import watcher_lock

log = logging.getLogger(__name__)

# The marker that a watcher for a lease was just queued: `<lease>#queued`, beside the lease.
QUEUED_SUFFIX = "#queued"
# After a dying lease expires, wait this much more (at random) before checking: spreads workers.
EXPIRY_JITTER = (0.05, 1.0)


def lease_name(kind: str, cluster: str = DEFAULT_CLUSTER) -> str:
    """The lease of one cluster's watcher for `kind`: the kind alone for the default cluster."""
    return kind if cluster == DEFAULT_CLUSTER else f"{cluster}/{kind}"


@dataclass
class Adoption:
    """What one check did: the kinds it started, and when the soonest held lease runs out."""

    started: list[str] = field(default_factory=list)
    soonest_expiry: float | None = None


def adopt_free(
    kinds: Iterable[str], *, owner: str, start: Callable[[str], None], hold: float
) -> Adoption:
    """Call `start(kind)` for every kind whose lease is free and for which nobody queued a
    watcher in the last `hold` seconds."""
    adoption = Adoption()
    for kind in kinds:
        name = lease_name(kind)
        left = watcher_lock(name, owner=owner).remaining()
        if left is not None:
            if adoption.soonest_expiry is None or left < adoption.soonest_expiry:
                adoption.soonest_expiry = left
            continue
        if not watcher_lock(name + QUEUED_SUFFIX, owner=owner, ttl=hold).acquire():
            continue
        start(kind)
        adoption.started.append(kind)
    return adoption


class LeaseSupervisor:
    """A daemon thread that adopts free leases every `period` seconds (±25 %) until `stop`.

    `consumes()` is asked before each check: a worker that does not (or no longer) consume the
    watch queue leaves the leases to the workers that do.
    """

    def __init__(
        self,
        *,
        kinds: Iterable[str],
        owner: str,
        start: Callable[[str], None],
        consumes: Callable[[], bool],
        period: float,
        stop: threading.Event,
        rng: random.Random | None = None,
    ) -> None:
        self.kinds = list(kinds)
        self.owner = owner
        self.start_watcher = start
        self.consumes = consumes
        self.period = period
        self.stop = stop
        self.checks = 0
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not secrecy

    def check(self) -> Adoption:
        """One round: queue a watcher for every free lease."""
        if not self.consumes():
            return Adoption()
        self.checks += 1
        try:
            adoption = adopt_free(
                self.kinds, owner=self.owner, start=self.start_watcher, hold=self.period
            )
        except Exception:  # noqa: BLE001 - Redis away: the next round tries again
            log.exception("adopting watch leases failed")
            return Adoption()
        if adoption.started:
            log.info("adopted free watch leases: %s", ", ".join(adoption.started))
        return adoption

    def next_delay(self, adoption: Adoption) -> float:
        """A period (±25 %), or less when a lease runs out before that: just after it does."""
        delay = self.period * self._rng.uniform(0.75, 1.25)
        soonest = adoption.soonest_expiry
        if soonest is not None and soonest < delay:
            delay = soonest + self._rng.uniform(*EXPIRY_JITTER)
        return delay

    def run(self) -> None:
        # The first check comes at once (a little jitter): a worker alone must not wait a period.
        delay = self._rng.uniform(0, min(1.0, self.period / 4))
        while not self.stop.wait(delay):
            delay = self.next_delay(self.check())

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="watch-lease-supervisor", daemon=True)
        thread.start()
        return thread
