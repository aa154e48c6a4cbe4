"""Dashboard models: utilisation history for the overview chart.

The cluster's own objects live in `inventory` and `claims`; this app only keeps what the cluster
does not remember for us, a time series of how many devices were held.
"""

from __future__ import annotations

from django.db import models


class UtilisationSample(models.Model):
    """How many current devices of one driver were allocated, shared, tainted at one moment.

    One row per driver per sample; the overview draws allocated / total over time from them.
    """

    taken_at = models.DateTimeField(db_index=True)
    driver = models.CharField(max_length=253)
    total = models.PositiveIntegerField(default=0)
    allocated = models.PositiveIntegerField(
        default=0, help_text="Devices held by at least one claim (exclusive, shared or admin)."
    )
    tainted = models.PositiveIntegerField(default=0)
    unhealthy = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["taken_at", "driver"]
        constraints = [
            models.UniqueConstraint(
                fields=["taken_at", "driver"], name="utilisation_sample_time_driver_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.driver}@{self.taken_at:%Y-%m-%d %H:%M}: {self.allocated}/{self.total}"

    @property
    def fraction(self) -> float:
        return self.allocated / self.total if self.total else 0.0
