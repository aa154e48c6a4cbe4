"""The utilisation history: one sample per driver, pruned past the kept window."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from claims.devices.counts import driver_utilisation
from claims.devices.history import take_sample
from claims.models import UtilisationSample
from tests.console.demo import load_demo


@pytest.fixture
def demo(db) -> None:
    """A 10-node demo cluster (seed 1) in the database."""
    load_demo(nodes=10, seed=1)


def test_a_sample_records_each_driver_as_the_services_count_it(demo) -> None:
    """One row per driver, with the totals driver_utilisation reports."""
    rows = take_sample()
    expected = driver_utilisation()
    assert {row.driver for row in rows} == set(expected)
    for row in UtilisationSample.objects.all():
        assert row.total == expected[row.driver]["total"]
        assert row.allocated == expected[row.driver]["allocated"]


def test_old_samples_are_pruned(demo) -> None:
    """Samples older than the kept window go when a new one is taken."""
    now = timezone.now()
    take_sample(now=now - timedelta(days=9))
    take_sample(now=now)
    assert not UtilisationSample.objects.filter(taken_at__lt=now - timedelta(days=7)).exists()
    assert UtilisationSample.objects.filter(taken_at=now).exists()
