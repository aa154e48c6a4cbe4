"""Record one utilisation sample now (what the beat task does every minute)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from claims.devices.history import take_sample
from inventory.clusters import in_default_cluster


class Command(BaseCommand):
    help = "Record a UtilisationSample per driver from the current device states."

    @in_default_cluster
    def handle(self, *args: Any, **options: Any) -> None:
        rows = take_sample()
        for row in rows:
            self.stdout.write(f"{row.driver}: {row.allocated}/{row.total} allocated")
        self.stdout.write(self.style.SUCCESS(f"recorded {len(rows)} sample(s)"))
