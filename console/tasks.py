"""Celery tasks of the console: the beat task that samples utilisation for the overview chart.

The console registers it with beat (`console.apps`); the samples are claims data
(`claims.devices.history`).
"""

from __future__ import annotations

from celery import shared_task

from claims.devices.history import take_sample
from inventory.clusters import in_default_cluster


@shared_task(ignore_result=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=3)
@in_default_cluster
def sample_utilisation() -> int:
    """Beat task (every minute): sample device utilisation per driver; returns rows written."""
    return len(take_sample())
