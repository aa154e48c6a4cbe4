"""What-if budgets are CPU time of the question's thread, so load does not change the answer.

A wall-clock budget also counts the time other requests hold the CPU (or the GIL): under load the
same question gave up early and said nodesFit 594/5000 where a quiet machine said 4366/5000. Here
one, four and eight clients ask the same question at once, with a budget of three times the CPU
one question takes alone (the search is only part of it): every answer is the complete one,
while with eight clients the process spent more CPU than the budget during each question (the
others' work, which a wall-clock deadline would have charged to it; with a wall-clock budget of
the same size this test fails). Everything is measured in CPU time, none in wall time.
"""

from __future__ import annotations

import resource
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connections

from claims.whatif.service import forget_simulations, what_if
from claims.whatif.state import forget_cluster_state, forget_selector_caches
from dashboard import scope
from demo.generator import generate_demo_cluster
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.helpers import claim_yaml

NODES = 150
GPU = "gpu.example.com"
# A CEL selector on every GPU: real work per node, as a user's question has.
QUESTION = claim_yaml(
    name="cpu-budget",
    count=2,
    selector=f'device.capacity["{GPU}"].memory.isLessThan(quantity("100Gi"))',
)
# With an assumption every client builds a private simulation when another holds one, so the
# searches really run side by side instead of taking turns on one.
ASSUME = [{"op": "remove-node", "node": "node-0001"}]


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in {"elapsedSeconds", "cached"}}


def _ask(budget: float | None) -> tuple[dict[str, Any], float, float]:
    """The answer, the CPU of this thread and of the whole process while it was asked."""
    thread, process = time.thread_time(), _process_cpu()
    try:
        answer = what_if(QUESTION, assume=ASSUME, budget=budget, use_cache=False)
    finally:
        connections.close_all()
    return answer, time.thread_time() - thread, _process_cpu() - process


def _alone() -> float:
    """The CPU of one question on a simulation of its own, as every client but one builds:
    a kept simulation answers again from its classes' kept verdicts at a fraction of that."""
    forget_simulations()
    return _ask(None)[1]


@pytest.fixture
def interleaved() -> Iterator[None]:
    """Threads take turns every 0.1 ms instead of every 5 ms: the clients' searches interleave
    finely, as requests of several processes on a loaded machine do."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("clients", [1, 4, 8])
def test_the_same_complete_answer_with_one_four_and_eight_clients(
    clients: int, interleaved: None
) -> None:
    """Concurrent clients get the unbudgeted answer whole, within a CPU budget a wall-clock
    budget of the same size would have exceeded."""
    load_objects(generate_demo_cluster(nodes=NODES, seed=7))
    forget_cluster_state()
    forget_simulations()
    forget_selector_caches()
    cache.clear()
    reference, _, _ = _ask(None)  # warms the shared cluster state and selector caches
    assert reference["summary"]["nodesFit"] > NODES // 2
    alone = statistics.median(_alone() for _ in range(3))
    budget = 3 * alone
    start = threading.Barrier(clients)

    def client(_: int) -> tuple[dict[str, Any], float, float]:
        start.wait()
        return _ask(budget)

    with ThreadPoolExecutor(max_workers=clients) as pool:
        results = list(pool.map(scope.carried(client), range(clients)))
    for answer, own, during in results:
        assert "gaveUp" not in answer
        assert _comparable(answer) == _comparable(reference)
        if clients == 8:
            # Seven others searched meanwhile: more CPU went by during this question than it
            # spent itself, which a wall-clock deadline would have counted against it. (Not
            # more than the budget: kept verdicts make the others' questions cheap.)
            assert during > own
