"""The utilisation sampler and the overview chart drawn from its samples."""

from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from claims.devices.counts import driver_utilisation
from console.tasks import sample_utilisation, take_sample
from dashboard.models import UtilisationSample


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


def test_task_and_command_both_sample(demo) -> None:
    """The beat task and the management command each add one sample per driver."""
    drivers = len(driver_utilisation())
    assert sample_utilisation() == drivers
    call_command("sample_utilisation", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert UtilisationSample.objects.count() == 2 * drivers


def test_overview_draws_one_line_per_driver(demo, viewer_client: Client) -> None:
    """With two samples the overview's SVG holds one polyline per driver."""
    now = timezone.now()
    take_sample(now=now - timedelta(hours=2))
    take_sample(now=now)
    response = viewer_client.get(reverse("overview"))
    body = response.content.decode()
    assert body.count("<polyline") == len(driver_utilisation())
    assert "<svg" in body
