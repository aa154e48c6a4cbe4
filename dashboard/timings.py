"""The what-if latency histogram: one set of buckets for every process that answers what-ifs.

It is kept in Redis when settings.REDIS_URL is set (all processes add to one set of buckets) and
in the process otherwise (then it is per process). The what-if service observes into it; the
`/metrics` collector exports it.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence

from django.conf import settings

log = logging.getLogger(__name__)

WHATIF_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, math.inf,
)  # fmt: skip
REDIS_KEY = "dra-dashboard:metrics:whatif-seconds"
REDIS_TIMEOUT_SECONDS = 0.5


class LocalHistogram:
    """Bucket counts, sum and count of observations in this process (thread-safe)."""

    def __init__(self, buckets: Sequence[float] = WHATIF_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self._lock = threading.Lock()
        self._counts = [0] * len(self.buckets)
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        index = bucket_index(self.buckets, seconds)
        with self._lock:
            self._counts[index] += 1
            self._sum += seconds

    def snapshot(self) -> tuple[list[int], float]:
        """Per-bucket (not cumulative) counts and the sum."""
        with self._lock:
            return list(self._counts), self._sum

    def reset(self) -> None:
        with self._lock:
            self._counts = [0] * len(self.buckets)
            self._sum = 0.0


def bucket_index(buckets: Sequence[float], value: float) -> int:
    """Index of the first bucket whose upper bound (`le`) holds `value`."""
    for index, bound in enumerate(buckets):
        if value <= bound:
            return index
    return len(buckets) - 1


class RedisHistogram:
    """The same buckets kept in one Redis hash, so every process adds to and reads one histogram.

    Fields: `b<index>` per-bucket counts and `sum`; a MULTI/EXEC pipeline keeps them consistent.
    """

    def __init__(self, url: str, *, buckets: Sequence[float] = WHATIF_BUCKETS) -> None:
        import redis

        self.url = url
        self.buckets = tuple(buckets)
        self.client = redis.Redis.from_url(
            url,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            decode_responses=True,
        )

    def observe(self, seconds: float) -> None:
        pipeline = self.client.pipeline(transaction=True)
        pipeline.hincrby(REDIS_KEY, f"b{bucket_index(self.buckets, seconds)}", 1)
        pipeline.hincrbyfloat(REDIS_KEY, "sum", seconds)
        pipeline.execute()

    def snapshot(self) -> tuple[list[int], float]:
        stored = {str(key): str(value) for key, value in self.client.hgetall(REDIS_KEY).items()}
        counts = [int(stored.get(f"b{index}", 0)) for index in range(len(self.buckets))]
        return counts, float(stored.get("sum", 0.0))

    def reset(self) -> None:
        self.client.delete(REDIS_KEY)


_local = LocalHistogram()
_shared: RedisHistogram | None = None
_shared_lock = threading.Lock()


def _shared_histogram() -> RedisHistogram | None:
    """The Redis-backed histogram for settings.REDIS_URL (rebuilt when the URL changes)."""
    global _shared
    url = settings.REDIS_URL
    if not url:
        return None
    with _shared_lock:
        if _shared is None or _shared.url != url:
            _shared = RedisHistogram(url)
        return _shared


def observe_whatif_seconds(seconds: float) -> None:
    """Record how long one what-if question took. Never raises: metrics must not break what-if.

    With Redis configured the observation goes to the shared histogram; if Redis fails it is kept
    in this process and still exported by this process's scrapes.
    """
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        log.warning("observe_whatif_seconds: not a number: %r", seconds)
        return
    if math.isnan(value) or value < 0:
        log.warning("observe_whatif_seconds: ignoring %r (must be >= 0)", seconds)
        return
    shared = _shared_histogram()
    if shared is not None:
        try:
            shared.observe(value)
            return
        except Exception as exc:  # Redis down: keep the observation locally
            log.warning("observe_whatif_seconds: Redis unavailable, kept in process: %s", exc)
    _local.observe(value)


def whatif_snapshot() -> tuple[list[int], float]:
    """Per-bucket counts and sum of what-if latency: Redis (when configured) plus this process."""
    counts, total = _local.snapshot()
    shared = _shared_histogram()
    if shared is not None:
        try:
            shared_counts, shared_sum = shared.snapshot()
        except Exception as exc:
            log.warning(
                "what-if histogram: Redis unavailable, exporting this process only: %s", exc
            )
        else:
            counts = [a + b for a, b in zip(counts, shared_counts, strict=True)]
            total += shared_sum
    return counts, total


def reset_whatif_histogram() -> None:
    """Forget every what-if observation (tests, and operators after a deploy if they wish)."""
    _local.reset()
    shared = _shared_histogram()
    if shared is not None:
        shared.reset()
