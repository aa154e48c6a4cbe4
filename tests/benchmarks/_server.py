"""Helpers for benchmarks that time a real server process: a shared database, the server, the demo.

The benchmark process loads the database and changes it; the server (`console.serve`, as `bin/run`
starts it, without the sync) answers over loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import IO, Any

from _django import ROOT


def setup_shared_database(tmp: Path) -> str:
    """Point Django at a fresh database a server process can open too; returns its URL.

    A SQLite file in `tmp`, or a fresh test database beside the PostgreSQL database that
    DASHBOARD_DATABASE_URL names.
    """
    url = os.environ.get("DASHBOARD_DATABASE_URL", "")
    if not url.startswith("postgres"):
        url = f"sqlite:///{tmp / 'bench.sqlite3'}"
        os.environ["DASHBOARD_DATABASE_URL"] = url
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from dashboard import scope
    from inventory.clusters import cluster_id

    # The benchmark's whole run reads and writes the default cluster (looked up when first
    # needed, after the migrations).
    scope.enter_for_good(cluster_id)
    if connection.vendor == "postgresql":
        connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
        return url.rsplit("/", 1)[0] + f"/{connection.settings_dict['NAME']}"
    call_command("migrate", verbosity=0, interactive=False)
    return url


def load_demo(nodes: int, *, seed: int = 1) -> dict[str, list[dict[str, Any]]]:
    """The demo cluster written through the sync's write path; its objects per kind."""
    from demo.generator import generate_demo_cluster
    from inventory.clusters import in_cluster
    from inventory.sync import HANDLERS, upsert_events

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in generate_demo_cluster(nodes=nodes, seed=seed):
        by_kind[str(obj.get("kind"))].append(obj)
    order = ("DeviceClass", "Node", "ResourceSlice", "DeviceTaintRule")
    with in_cluster():
        for kind in (*order, *sorted(set(by_kind) - set(order))):
            if kind in HANDLERS:
                upsert_events(kind, [(raw, None) for raw in by_kind[kind]], publish=False)
    return by_kind


def start_server(url: str, *, stderr: IO[bytes] | int = subprocess.DEVNULL) -> tuple[Any, str]:
    """The web server on a free loopback port over the database at `url`: (process, URL), ready."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {
        **os.environ,
        "DASHBOARD_DATABASE_URL": url,
        "DASHBOARD_EMBEDDED_SYNC": "0",
        "DASHBOARD_DEBUG": "0",
    }
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/python"), "-m", "console.serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2):
                return server, base
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not answer /healthz within 60 s") from None
            time.sleep(0.1)
