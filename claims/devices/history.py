"""Utilisation history: one `UtilisationSample` per driver per sample, for the overview chart.

The cluster remembers only the present; this keeps a week of how many devices were held. The
console's beat task (and `manage.py sample_utilisation`) call `take_sample` every minute.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from claims.devices.counts import driver_utilisation
from claims.models import UtilisationSample

# Samples older than this are dropped: the chart shows a day, a week is plenty of history.
KEEP_DAYS = 7


def take_sample(
    *, now: datetime | None = None, keep_days: int = KEEP_DAYS
) -> list[UtilisationSample]:
    """Record one UtilisationSample per driver from the current device states; prune old ones."""

    now = now or timezone.now()
    counts = driver_utilisation()
    rows = [
        UtilisationSample(
            taken_at=now,
            driver=driver,
            total=c.get("total", 0),
            allocated=c.get("allocated", 0),
            tainted=c.get("tainted", 0),
            unhealthy=c.get("unhealthy", 0),
        )
        for driver, c in sorted(counts.items())
    ]
    with transaction.atomic():
        UtilisationSample.objects.filter(taken_at=now).delete()
        UtilisationSample.objects.bulk_create(rows)
        UtilisationSample.objects.filter(taken_at__lt=now - timedelta(days=keep_days)).delete()
    return rows
