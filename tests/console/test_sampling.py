"""The beat task and command that sample utilisation, and the overview chart drawn from them."""

from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from claims.devices.counts import driver_utilisation
from claims.devices.history import take_sample
from claims.models import UtilisationSample
from console.tasks import sample_utilisation


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
