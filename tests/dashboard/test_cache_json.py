"""The Django cache stores JSON, never pickle: a value planted in Redis cannot run code.

The tests without a server drive JSONRedisCache through an in-memory stand-in for the redis-py
client; the ones taking `redis_password_server` run against a real password-protected Redis.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from dashboard.cache import JSONLocMemCache, JSONRedisCache, JSONSerializer
from tests.paths import free_port

PASSWORD = "test-redis-password-0123456789"


class Planted:
    """Unpickling this touches `marker`: the proof a pickle payload was executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


class FakeRedis:
    """The few redis-py client calls RedisCacheClient makes, over a dict (no expiry)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    def mget(self, keys: list[str]) -> list[bytes | None]:
        return [self.data.get(key) for key in keys]

    def set(self, key: str, value: bytes | int, ex: int | None = None, nx: bool = False) -> bool:
        if nx and key in self.data:
            return False
        self.data[key] = str(value).encode() if isinstance(value, int) else value
        return True

    def exists(self, key: str) -> int:
        return int(key in self.data)

    def incr(self, key: str, delta: int) -> int:
        value = int(self.data[key]) + delta
        self.data[key] = str(value).encode()
        return value

    def delete(self, *keys: str) -> int:
        return sum(self.data.pop(key, None) is not None for key in keys)


@pytest.fixture
def fake_cache() -> tuple[JSONRedisCache, FakeRedis]:
    backend = JSONRedisCache("redis://unused:6379/0", {})
    store = FakeRedis()
    backend._cache.get_client = lambda key=None, *, write=False: store  # type: ignore[method-assign]
    return backend, store


@pytest.mark.redis
def test_settings_never_unpickle_from_redis() -> None:
    """With a Redis URL the cache is the JSON backend and the channel layer uses msgpack."""
    source = (Path(settings.BASE_DIR) / "dashboard" / "settings.py").read_text()
    assert '"BACKEND": "dashboard.cache.JSONRedisCache"' in source
    assert '"serializer_format": "msgpack"' in source
    assert "django.core.cache.backends.redis.RedisCache" not in source
    expected = "JSONRedisCache" if settings.REDIS_URL else "JSONLocMemCache"
    assert settings.CACHES["default"]["BACKEND"] == f"dashboard.cache.{expected}"
    assert settings.CELERY_ACCEPT_CONTENT == ["json"]
    assert settings.CELERY_TASK_SERIALIZER == settings.CELERY_RESULT_SERIALIZER == "json"


def test_values_are_stored_as_json(fake_cache) -> None:
    """What reaches Redis is JSON text, and it reads back equal; integers stay bare for INCR."""
    backend, store = fake_cache
    job = {"id": "abc", "status": "done", "progress": {"done": 3, "total": 3}, "result": None}
    backend.set("job", job)
    [stored] = [v for k, v in store.data.items() if k.endswith(":job")]
    assert json.loads(stored) == job
    assert backend.get("job") == job
    assert backend.add("counter", 0) is True
    assert backend.incr("counter") == 1
    assert backend.get("counter") == 1
    assert backend.get_many(["job", "counter", "missing"]) == {"job": job, "counter": 1}


def test_a_planted_pickle_is_a_miss_and_never_runs(fake_cache, tmp_path: Path, caplog) -> None:
    """A pickle written straight into Redis reads as a miss; its payload does not execute."""
    backend, store = fake_cache
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Planted(marker))
    pickle.loads(payload)  # the payload is live: unpickling it does touch the marker
    assert marker.exists()
    marker.unlink()
    backend.set("whatif:job:1", {"status": "queued"})
    key = next(iter(store.data))
    store.data[key] = payload
    assert backend.get("whatif:job:1", "default") == "default"
    assert backend.get_many(["whatif:job:1"]) == {}
    assert not marker.exists()
    assert "not JSON" in caplog.text


def test_channel_layer_msgpack_does_not_run_a_pickle(tmp_path: Path) -> None:
    """channels_redis' msgpack deserializer fails on a pickle payload without executing it."""
    from channels_redis.serializers import registry

    marker = tmp_path / "pwned"
    with pytest.raises(ValueError):
        registry.get_serializer("msgpack").deserialize(pickle.dumps(Planted(marker)))
    assert not marker.exists()


def test_values_json_cannot_hold_are_refused() -> None:
    """Bytes, sets, objects and NaN fail on set instead of being pickled."""
    serializer = JSONSerializer()
    for value in (b"raw", {1, 2}, object(), float("nan")):
        with pytest.raises((TypeError, ValueError)):
            serializer.dumps(value)


def test_the_default_cache_has_the_same_json_semantics() -> None:
    """Without Redis the in-process cache also round-trips through JSON and refuses the rest."""
    local = JSONLocMemCache("json-semantics", {})
    local.set("answer", {"nodes": ("a", "b"), "fits": True})
    assert local.get("answer") == {"nodes": ["a", "b"], "fits": True}
    assert local.get("missing", "fallback") == "fallback"
    assert local.add("n", 1) and local.incr("n", 2) == 3 and local.get("n") == 3
    assert local.get_or_set("made", lambda: [1, 2]) == [1, 2]
    with pytest.raises(TypeError):
        local.set("bad", b"bytes")


def test_the_in_process_cache_is_bounded_by_bytes() -> None:
    """Values past MAX_BYTES push out the least recently used; one over it alone is not kept."""
    local = JSONLocMemCache("bounded-bytes", {"OPTIONS": {"MAX_BYTES": 100_000}})
    local.clear()
    text = "x" * 30_000
    for name in "abc":
        local.set(name, text)
    assert local.get("a") == text  # now the most recently used
    local.set("d", text)
    assert local.get("b") is None
    assert [local.get(name) is not None for name in "acd"] == [True, True, True]
    assert local.size() <= 100_000
    local.set("a", "y" * 200_000)
    assert local.get("a") is None, "a stale value must not outlive a refused newer one"
    assert local.size() <= 100_000


def test_the_default_in_process_cache_has_a_byte_bound() -> None:
    """Without Redis, the settings bound the in-process cache by bytes (it holds what-if
    answers); read in a fresh interpreter, so a run with Redis checks it too."""
    env = {k: v for k, v in os.environ.items() if k != "DASHBOARD_REDIS_URL"}
    env["DASHBOARD_SECRET_KEY"] = "test-only-secret-key-never-used-outside-the-test-suite"
    code = "import json, dashboard.settings as s; print(json.dumps(s.CACHES['default']))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    default = json.loads(out.strip().splitlines()[-1])
    assert default["BACKEND"] == "dashboard.cache.JSONLocMemCache"
    assert 0 < default["OPTIONS"]["MAX_BYTES"] <= 64 * 1024 * 1024


def test_what_if_jobs_in_the_cache_survive_json(db) -> None:
    """A what-if job document read back from the cache equals what the job module stored."""
    from claims.tasks import run_what_if_job
    from claims.whatif.jobs import create_job, get_job

    cache.clear()
    job = create_job({"yaml": "not: a claim"}, queue=run_what_if_job.delay)
    stored = get_job(job["id"])
    assert stored is not None and stored["id"] == job["id"]
    assert stored["status"] in {"done", "failed", "queued", "running"}
    cache.clear()


@pytest.fixture(scope="module")
def redis_password_server() -> Iterator[str]:
    """A throwaway redis-server requiring PASSWORD; its URL carries the password."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (bin/services installs it)"
    port = free_port()
    process = subprocess.Popen(
        [binary, "-", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    process.stdin.write(f"requirepass {PASSWORD}\n".encode())
    process.stdin.close()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=0.5).ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(timeout=10)


def test_redis_refuses_clients_without_the_password(redis_password_server: str) -> None:
    """The password from the URL is required: without it every command is refused."""
    port = redis_password_server.rsplit(":", 1)[1].split("/")[0]
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://127.0.0.1:{port}/0").set("x", "1")
    assert redis.Redis.from_url(redis_password_server).ping() is True


def test_real_redis_cache_is_json_and_ignores_planted_pickles(
    redis_password_server: str, tmp_path: Path
) -> None:
    """Against real Redis: JSON on the wire, and a planted pickle is a miss that never runs."""
    backend = JSONRedisCache(redis_password_server, {})
    raw = redis.Redis.from_url(redis_password_server)
    backend.set("doc", {"a": [1, 2]}, 60)
    key = backend.make_and_validate_key("doc")
    assert raw.get(key) == b'{"a":[1,2]}'
    marker = tmp_path / "pwned"
    raw.set(key, pickle.dumps(Planted(marker)))
    assert backend.get("doc") is None
    assert not marker.exists()
    backend.add("count", 0, 60)
    assert backend.incr("count", 5) == 5


async def test_channel_layer_with_password_uses_msgpack(redis_password_server: str) -> None:
    """The Redis channel layer, built as settings build it, authenticates and speaks msgpack."""
    from channels_redis.core import RedisChannelLayer
    from channels_redis.serializers import MsgPackSerializer

    layer = RedisChannelLayer(hosts=[redis_password_server], serializer_format="msgpack")
    assert isinstance(layer._serializer, MsgPackSerializer)
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "devices.changed", "ids": [1, 2]})
    assert await layer.receive(channel) == {"type": "devices.changed", "ids": [1, 2]}
    await layer.flush()
    await layer.close_pools()
