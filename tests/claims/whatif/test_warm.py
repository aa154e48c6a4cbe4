"""The what-if state built at process start: the first question after it reads and builds nothing,
answers as a cold one does, and questions asked while it is built (and while the cluster changes)
get the answers they get alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from django.db import OperationalError, connections

from claims.whatif import state
from claims.whatif.service import forget_simulations, warm_live_simulation, what_if
from claims.whatif.state import forget_cluster_state
from dashboard import scope
from inventory.sync import upsert_events
from tests.claims.whatif.helpers import claim_yaml

THREADS = 4
T = TypeVar("T")


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    # A write moves the fingerprint and the time even when it restores the same object.
    varies = {"elapsedSeconds", "cached", "fingerprint", "cluster"}
    return {k: v for k, v in answer.items() if k not in varies}


def _unlocked(call: Callable[[], T]) -> T:
    """`call()`, again while the test database's table lock says another thread writes: the
    in-memory SQLite of the tests locks tables across connections, which an on-disk database in
    WAL mode or PostgreSQL never does to readers."""
    for _ in range(200):
        try:
            return call()
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.01)
    return call()


def _cold(source: str) -> dict[str, Any]:
    forget_cluster_state()
    forget_simulations()
    return _comparable(what_if(source, use_cache=False))


def test_first_question_after_warm_builds_nothing(demo) -> None:
    """After the warm-up every node's pools are built: the first question parses no slice and
    builds no pool, and answers exactly as a question on a cold process does."""
    source = claim_yaml(name="warm", count=2)
    cold = _cold(source)
    forget_cluster_state()
    forget_simulations()

    nodes = warm_live_simulation()
    slice_cache = state._slice_cache
    parsed, pools = len(slice_cache), len(slice_cache.pools)
    assert nodes == len(demo["Node"])
    assert pools > 0
    answer = _comparable(what_if(source, use_cache=False))
    assert (len(slice_cache), len(slice_cache.pools)) == (parsed, pools)
    assert answer == cold


@pytest.mark.django_db(transaction=True)
def test_questions_during_warm_and_a_change_match_serial_answers(demo) -> None:
    """Questions racing the warm-up and a claim released meanwhile each get the answer of the
    state they were asked in: every answer equals the serial answer before or after the change."""
    source = claim_yaml(name="race", count=2)
    claim = next(c for c in demo["ResourceClaim"] if (c.get("status") or {}).get("allocation"))
    before = _cold(source)
    released = {
        **claim,
        "metadata": {**claim["metadata"], "resourceVersion": "999999"},
        "status": {},
    }
    upsert_events("ResourceClaim", [(released, None)], publish=False)
    after = _cold(source)
    upsert_events("ResourceClaim", [(claim, None)], publish=False)
    assert before != after, "releasing an allocated claim must change the answer"
    assert _cold(source) == before
    forget_cluster_state()
    forget_simulations()

    start = threading.Barrier(THREADS + 1)

    def ask(index: int) -> dict[str, Any]:
        try:
            start.wait()
            if index == THREADS // 2:
                _unlocked(lambda: upsert_events("ResourceClaim", [(released, None)], publish=False))
            return _comparable(_unlocked(lambda: what_if(source, use_cache=False)))
        finally:
            connections.close_all()

    def warm() -> None:
        try:
            start.wait()
            _unlocked(warm_live_simulation)
        finally:
            connections.close_all()

    warmer = threading.Thread(target=scope.carried(warm))
    warmer.start()
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        answers = list(pool.map(scope.carried(ask), range(THREADS)))
    warmer.join()
    assert all(a in (before, after) for a in answers)
    # After all of it, the kept state is the changed cluster's.
    assert _comparable(what_if(source, use_cache=False)) == after
