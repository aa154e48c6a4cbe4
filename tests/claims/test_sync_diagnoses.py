"""A committed batch that can change a waiting claim's fit asks for diagnoses, others do not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from claims.sync import changes_diagnoses
from claims.tasks import refresh_diagnoses
from dashboard.celery import app
from inventory.sync import BatchResult
from tests import factories as f


@pytest.fixture
def queued(monkeypatch) -> Iterator[list[dict[str, Any]]]:
    """Runs of `refresh_diagnoses` queued, as a worker setup would (not inline)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(refresh_diagnoses, "apply_async", lambda **kwargs: calls.append(kwargs))
    cache.clear()
    before = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield calls
    app.conf.task_always_eager = before
    cache.clear()


def test_only_topics_a_fit_depends_on_count() -> None:
    """Nodes, devices and claims change a fit; quotas and templates alone do not."""
    assert changes_diagnoses(BatchResult(changed={"nodes": {"n"}}))
    assert changes_diagnoses(BatchResult(changed={"claims": {"1"}}))
    assert not changes_diagnoses(BatchResult(changed={"quotas": {"1"}, "templates": {"2"}}))


@pytest.mark.django_db(transaction=True)
def test_a_node_batch_queues_one_debounced_run(queued) -> None:
    """After the commit the app's hook queues `refresh_diagnoses` once, however many batches."""
    f.create(f.node_object("node-a"))
    f.create(f.node_object("node-b"))
    assert len(queued) == 1 and queued[0]["countdown"] > 0


@pytest.mark.django_db(transaction=True)
def test_a_quota_batch_queues_nothing(queued) -> None:
    """A batch of quotas alone cannot change a fit: nothing is queued."""
    f.create(f.quota_object("q", hard={"pods": "4"}))
    assert queued == []
