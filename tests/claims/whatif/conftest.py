"""Fixtures: a demo cluster loaded through the sync write path, and clean what-if caches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from claims.pods import forget_dra_extended_names
from claims.whatif.service import forget_simulations
from claims.whatif.state import forget_cluster_state
from demo.generator import generate_demo_cluster
from inventory.sync import HANDLERS, upsert_events

KIND_ORDER = ("DeviceClass", "Node", "ResourceSlice", "DeviceTaintRule")


def load_objects(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Upsert objects kind by kind (referenced kinds first); returns them per kind."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        by_kind[str(obj.get("kind"))].append(obj)
    for kind in (*KIND_ORDER, *sorted(set(by_kind) - set(KIND_ORDER))):
        if kind in HANDLERS and by_kind.get(kind):
            result = upsert_events(kind, [(raw, None) for raw in by_kind[kind]], publish=False)
            assert not result.skipped, f"{kind}: {result.skipped[:3]}"
    return dict(by_kind)


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    """Every test starts without kept cluster state, simulations or cached answers."""
    forget_cluster_state()
    forget_simulations()
    forget_dra_extended_names()
    cache.clear()


@pytest.fixture(autouse=True)
def eager_tasks(settings) -> Iterator[None]:
    """Jobs run inline: the PostgreSQL + Redis test run has a broker but no worker, and the
    job threads that stand in for a worker then run none (tests/claims/whatif/test_local_jobs)."""
    from dashboard.celery import app

    settings.WHATIF_JOB_THREADS = 0
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def demo(db) -> dict[str, list[dict[str, Any]]]:
    """A 20-node demo cluster in the database."""
    return load_objects(generate_demo_cluster(nodes=20, seed=7))


@pytest.fixture
def small(db) -> dict[str, list[dict[str, Any]]]:
    """The four-node cluster of `tests.claims.whatif.cluster` in the database."""
    from tests.claims.whatif.cluster import objects

    return load_objects(objects())
