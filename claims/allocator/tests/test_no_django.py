"""The allocator package stays free of Django and of the apps' models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import json, sys
import claims.allocator
from claims.allocator import allocate_scenario
allocate_scenario({"node": {"metadata": {"name": "n"}}, "claims": []})
print(json.dumps(sorted(sys.modules)))
"""


def test_import_loads_no_django_or_models() -> None:
    """Importing and running the allocator in a fresh interpreter loads no Django or app models."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
    )
    modules = json.loads(completed.stdout)
    assert "claims.allocator.allocator" in modules
    forbidden = [
        name
        for name in modules
        if name == "django"
        or name.startswith("django.")
        or name == "inventory"
        or name.startswith("inventory.")
        or name == "claims.models"
    ]
    assert forbidden == []
