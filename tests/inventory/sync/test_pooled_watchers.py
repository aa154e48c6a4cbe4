"""Watcher threads hold no database connection while they wait on their streams.

One process runs a watcher thread per kind. With PostgreSQL's pool (DASHBOARD_DATABASE_POOL_SIZE)
a connection kept by a waiting watcher is one the pool cannot lend: more kinds than pooled
connections left the others waiting for the pool's timeout at every batch. A connection the
settings keep per thread (CONN_MAX_AGE, SQLite here, PostgreSQL without a pool) stays open.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from dashboard import scope
from inventory.sync import HANDLERS
from inventory.sync.watch.store import DatabaseSink


def _pooled() -> bool:
    return connection.vendor == "postgresql" and connection.pool is not None


def _batch(sink: DatabaseSink, version: int) -> None:
    sink.apply([], resource_version=str(version), rate=0.0)


@pytest.mark.django_db(transaction=True)
def test_a_written_batch_gives_a_pooled_connection_back_and_keeps_a_kept_one() -> None:
    """After a batch the watcher's thread holds a connection only if the settings keep one."""
    seen: dict[str, Any] = {}

    def watcher() -> None:
        sink = DatabaseSink("Node", watcher="test")
        sink.open()
        _batch(sink, 2)
        seen["open after the batch"] = connection.connection is not None
        connection.close()

    thread = threading.Thread(target=scope.carried(watcher))
    thread.start()
    thread.join()
    assert seen["open after the batch"] is (not _pooled())


@pytest.mark.django_db(transaction=True)
def test_more_watchers_than_pooled_connections_all_write() -> None:
    """Every kind's watcher writes, waits (as on its stream) until all have written, and writes
    again. Were a waiting watcher to keep its pooled connection, the kinds past the pool's size
    would wait for one until the pool's timeout and fail."""
    kinds = sorted(HANDLERS)
    if _pooled():
        assert connection.pool is not None
        assert len(kinds) > connection.pool.max_size, "the test needs more kinds than connections"
    waiting = threading.Barrier(len(kinds))
    failures: list[str] = []
    written: list[str] = []
    lock = threading.Lock()

    def watcher(kind: str) -> None:
        try:
            sink = DatabaseSink(kind, watcher=f"test-{kind}")
            sink.open()
            _batch(sink, 2)
            waiting.wait(timeout=120)
            _batch(sink, 3)
            with lock:
                written.append(kind)
        except Exception as error:  # noqa: BLE001 - the assertion below names it
            with lock:
                failures.append(f"{kind}: {error!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=scope.carried(watcher), args=(kind,)) for kind in kinds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert sorted(written) == kinds
