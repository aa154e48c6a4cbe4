"""Render time of every page at 1,000 nodes: `python -m tests.benchmarks.bench_pages [nodes]`.

Loads the demo cluster into a scratch SQLite database (DASHBOARD_VAR_DIR), then renders each
page a few times with the test client and prints the slowest time and the query count.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time


def main(nodes: int) -> None:
    os.environ.setdefault("DASHBOARD_VAR_DIR", tempfile.mkdtemp(prefix="bench-ui-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from claims.devices.history import take_sample
    from claims.models import ResourceClaim
    from inventory.models import Device, Node, Pool
    from tests.console.demo import load_demo

    settings.ALLOWED_HOSTS = ["testserver"]
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    # Reuse a database loaded by an earlier run (same DASHBOARD_VAR_DIR): loading takes minutes.
    if not Node.objects.exists():
        load_demo(nodes=nodes, seed=1)
        take_sample()
    print(
        f"loaded {nodes} nodes in {time.perf_counter() - started:.1f}s: "
        f"{Device.objects.count()} devices, {ResourceClaim.objects.count()} claims"
    )
    # DeviceClass counts: membership by CEL (cold: computed) and from the cache (warm).
    from claims.devices.classes import class_utilisation, forget_membership

    forget_membership()
    for label in ("cold", "warm", "warm"):
        begin = time.perf_counter()
        class_utilisation()
        print(f"class counts ({label}) {(time.perf_counter() - begin) * 1000:7.0f} ms")
    user, _ = User.objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)
    pool = Pool.objects.order_by("-device_count").first()
    claim = ResourceClaim.objects.filter(state="reserved").first()
    node = Node.objects.first()
    device = Device.objects.filter(pool=pool).first()
    urls = [
        "/",
        "/pools/",
        "/pools/?page=5",
        "/nodes/",
        "/nodes/?page=10",
        "/claims/",
        "/claims/?state=pending",
        "/templates/",
        "/quotas/",
        "/sync/",
        "/what-if/",
        f"/pools/{pool.driver}/{pool.name}/",
        f"/devices/{device.driver}/{device.pool_name}/{device.name}/",
        f"/nodes/{node.name}/",
        f"/claims/{claim.namespace}/{claim.name}/",
        "/leaks/",
        "/api/inventory/pool-status/?limit=1000",
    ]
    for url in urls:
        worst = 0.0
        for _ in range(3):
            with CaptureQueriesContext(connection) as ctx:
                begin = time.perf_counter()
                response = client.get(url)
                worst = max(worst, time.perf_counter() - begin)
            assert response.status_code == 200, url
        print(f"{url:50s} {worst * 1000:7.0f} ms {len(ctx.captured_queries):3d} queries")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
