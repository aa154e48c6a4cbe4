"""The Redis cache backend with JSON values instead of Django's pickle.

Django's RedisCache unpickles whatever it reads, so anyone who can write a key in Redis can run
code in every web and worker process. Here values are JSON: a value JSON cannot represent fails
loudly on `set`, and a stored value that is not JSON (a planted pickle, say) is logged and read
as a miss, never executed.

`JSONLocMemCache` gives the in-process default (no Redis) the same value semantics, so a value
that would not survive Redis fails in development and in the SQLite test run too.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

logger = logging.getLogger(__name__)


class JSONSerializer:
    """JSON for Redis values; integers stay bare so INCR keeps working on them."""

    def dumps(self, obj: Any) -> bytes | int:
        # Like Django's RedisSerializer: a bare int lets Redis INCR/DECR it atomically (bool is
        # not an int here, type() on purpose).
        if type(obj) is int:
            return obj
        # allow_nan=False: NaN/Infinity are not JSON, another process's parser would refuse them.
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()

    def loads(self, data: bytes | str) -> Any:
        # orjson reads a large cached answer several times faster; it refuses what json.dumps
        # above never writes (NaN), which then reads as a miss like any other non-JSON value.
        return orjson.loads(data)


class JSONRedisCacheClient(RedisCacheClient):
    """RedisCacheClient that reads undecodable values as misses instead of raising."""

    def __init__(self, servers: list[str], serializer: Any = None, **options: Any) -> None:
        super().__init__(servers, serializer=serializer or JSONSerializer, **options)

    def _decode(self, key: str, raw: bytes) -> tuple[bool, Any]:
        try:
            return True, self._serializer.loads(raw)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
            logger.warning("cache key %s holds a value that is not JSON; treated as a miss", key)
            return False, None

    def get(self, key: str, default: Any) -> Any:
        raw = self.get_client(key).get(key)
        if raw is None:
            return default
        ok, value = self._decode(key, raw)
        return value if ok else default

    def get_many(self, keys: Any) -> dict[str, Any]:
        keys = list(keys)
        found = {}
        for key, raw in zip(keys, self.get_client(None).mget(keys), strict=True):
            if raw is None:
                continue
            ok, value = self._decode(key, raw)
            if ok:
                found[key] = value
        return found


class JSONRedisCache(RedisCache):
    """settings.CACHES backend: `dashboard.cache.JSONRedisCache`, LOCATION a redis:// URL."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = JSONRedisCacheClient


_MISSING = object()


class JSONLocMemCache(LocMemCache):
    """LocMemCache storing what JSONSerializer would store in Redis (bare ints, else JSON text).

    OPTIONS `MAX_BYTES` bounds what it holds by bytes, not only by entries: its values live in
    the web process, and 300 entries (Django's bound) of megabyte what-if answers were most of
    that process's memory. Past the bound the least recently used go; a value alone over it is
    not kept.
    """

    _serializer = JSONSerializer()

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        super().__init__(name, params)
        max_bytes = (params.get("OPTIONS") or {}).get("MAX_BYTES")
        self._max_bytes: int | None = int(max_bytes) if max_bytes is not None else None

    def _set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> None:
        # Called with the lock held, `value` pickled.
        limit = self._max_bytes
        if limit is not None and len(value) > limit:
            self._delete(key)  # the key's older value would be stale
            return
        super()._set(key, value, timeout)
        if limit is not None:
            # LocMemCache keeps the most recently used first: the last are the first to go.
            while len(self._cache) > 1 and self.size() > limit:
                gone, _ = self._cache.popitem()
                self._expire_info.pop(gone, None)

    def size(self) -> int:
        """Bytes of the values held (as stored: pickled)."""
        return sum(map(len, self._cache.values()))

    def _load(self, stored: Any) -> Any:
        return stored if type(stored) is int else self._serializer.loads(stored)

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        return super().add(key, self._serializer.dumps(value), timeout, version)

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        super().set(key, self._serializer.dumps(value), timeout, version)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        stored = super().get(key, _MISSING, version)
        return default if stored is _MISSING else self._load(stored)
