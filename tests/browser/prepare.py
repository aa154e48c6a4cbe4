"""Prepare the browser tests' database: migrate, load a demo cluster, add a user and history.

Run as `python -m tests.browser.prepare <nodes> <seed>` with DASHBOARD_VAR_DIR set; prints the
raw objects of the cluster as JSON so the tests can apply changes to them.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta


def main(nodes: int, seed: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils import timezone

    from claims.devices.history import take_sample
    from inventory.sync import upsert_events
    from tests.console.demo import load_demo

    call_command("migrate", verbosity=0)

    from inventory.clusters import in_cluster

    with in_cluster():
        User.objects.create_user("viewer", "viewer@example.com", "viewer-password")
        objects = load_demo(nodes=nodes, seed=seed)
        # A real history for the chart: claims arrive in steps, one sample per step.
        claims = objects["ResourceClaim"]
        now = timezone.now()
        steps = 8
        from claims.models import ResourceClaim

        ResourceClaim.objects.all().delete()
        for step in range(steps + 1):
            part = claims[: len(claims) * step // steps]
            upsert_events("ResourceClaim", [(raw, None) for raw in part], publish=False)
            take_sample(now=now - timedelta(hours=3 * (steps - step)))
        # Loaded without a sync, as an import would: the header says "snapshot imported".
        from inventory.models import SnapshotImport

        SnapshotImport.objects.create(stored={kind: len(items) for kind, items in objects.items()})
        json.dump(objects, sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
