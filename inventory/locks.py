"""Who may watch a kind: one lock per kind, held by one watcher across every worker.

With Redis (settings.REDIS_URL) the lock is a key set with NX and an expiry that the holder renews;
a holder that dies stops renewing and the key expires, so another worker takes over. Without Redis
(the embedded single-process mode) a process-local lock with the same expiry rules stands in.
Renew and release only act when the caller still holds the lock (compare-and-set), so a holder
whose lock expired cannot extend or free another holder's lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from django.conf import settings

LOCK_PREFIX = "dra-dashboard:watch-lock:"

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class WatcherLock(Protocol):
    """A named lock with an owner and an expiry."""

    name: str
    owner: str
    ttl: float

    def acquire(self) -> bool: ...

    def renew(self) -> bool: ...

    def release(self) -> None: ...

    def holder(self) -> str | None: ...

    def remaining(self) -> float | None:
        """Seconds until the lock expires unless renewed; None when nobody holds it."""
        ...


_CLIENTS_GUARD = threading.Lock()
_CLIENTS: dict[str, Any] = {}


def _client(url: str) -> Any:
    """One Redis client (and connection pool) per URL for the process: the lease checks build
    two locks per kind every few seconds, which must not mean two new connections each."""
    with _CLIENTS_GUARD:
        client = _CLIENTS.get(url)
        if client is None:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
            _CLIENTS[url] = client
        return client


class RedisLock:
    """A lock held in Redis: SET NX PX to take it, Lua compare-and-set to renew and free it."""

    def __init__(self, name: str, *, owner: str, ttl: float, url: str) -> None:
        self.name = name
        self.owner = owner
        self.ttl = ttl
        self._key = LOCK_PREFIX + name
        self._redis = _client(url)

    def acquire(self) -> bool:
        return bool(self._redis.set(self._key, self.owner, nx=True, px=int(self.ttl * 1000)))

    def renew(self) -> bool:
        return bool(self._redis.eval(_RENEW, 1, self._key, self.owner, int(self.ttl * 1000)))

    def release(self) -> None:
        self._redis.eval(_RELEASE, 1, self._key, self.owner)

    def holder(self) -> str | None:
        value = self._redis.get(self._key)
        return value.decode() if isinstance(value, bytes) else value

    def remaining(self) -> float | None:
        milliseconds = int(self._redis.pttl(self._key))
        # -2: no such key; -1 (no expiry) cannot happen, every SET carries PX.
        return None if milliseconds < 0 else milliseconds / 1000


_LOCAL_GUARD = threading.Lock()
# name -> (owner, expires at on the monotonic clock)
_LOCAL_HOLDERS: dict[str, tuple[str, float]] = {}


class LocalLock:
    """A process-local lock with the same semantics, for running without Redis."""

    def __init__(self, name: str, *, owner: str, ttl: float) -> None:
        self.name = name
        self.owner = owner
        self.ttl = ttl

    def _current(self) -> str | None:
        held = _LOCAL_HOLDERS.get(self.name)
        if held is None or held[1] <= time.monotonic():
            return None
        return held[0]

    def acquire(self) -> bool:
        with _LOCAL_GUARD:
            if self._current() is not None:
                return False
            _LOCAL_HOLDERS[self.name] = (self.owner, time.monotonic() + self.ttl)
            return True

    def renew(self) -> bool:
        with _LOCAL_GUARD:
            if self._current() != self.owner:
                return False
            _LOCAL_HOLDERS[self.name] = (self.owner, time.monotonic() + self.ttl)
            return True

    def release(self) -> None:
        with _LOCAL_GUARD:
            if self._current() == self.owner:
                del _LOCAL_HOLDERS[self.name]

    def holder(self) -> str | None:
        with _LOCAL_GUARD:
            return self._current()

    def remaining(self) -> float | None:
        with _LOCAL_GUARD:
            if self._current() is None:
                return None
            return _LOCAL_HOLDERS[self.name][1] - time.monotonic()


def watcher_lock(name: str, *, owner: str, ttl: float = 30.0) -> WatcherLock:
    """The lock for `name`: in Redis when settings.REDIS_URL is set, process-local otherwise."""
    if settings.REDIS_URL:
        return RedisLock(name, owner=owner, ttl=ttl, url=settings.REDIS_URL)
    return LocalLock(name, owner=owner, ttl=ttl)
