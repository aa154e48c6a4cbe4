"""What a web process imports at start: the server and its application load, and the official
Kubernetes client is not among them (a web process imports it when it first talks to an API
server: 0.16 s of CPU at every start otherwise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT

PROBE = """
import json, sys
import console.serve
from uvicorn.importer import import_from_string
import_from_string(console.serve.DEFAULT_APP)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_web_process_starts_without_the_kubernetes_client() -> None:
    """console.serve and the ASGI application import no module of the `kubernetes` package."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DASHBOARD_EMBEDDED_SYNC": "0",
        "DASHBOARD_DATABASE_URL": "sqlite:///:memory:",
    }
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    modules = json.loads(completed.stdout.splitlines()[-1])
    assert "console.asgi" in modules and "claims.whatif.service" in modules
    assert [m for m in modules if m == "kubernetes" or m.startswith("kubernetes.")] == []
