"""A real server whose embedded watchers sync a fake API server, for the freshness browser test.

`python -m tests.browser.synced_server` (DASHBOARD_VAR_DIR set) migrates a fresh SQLite
database and adds the viewer; `start_synced_server` runs the web server as `bin/run` does, with
DASHBOARD_EMBEDDED_SYNC=1 and a kubeconfig naming the fake API server, which the test owns (and
stops, to see the header turn stale).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.console.hostile_server import server_env, start_server


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    User.objects.create_user("viewer", "viewer@example.com", "viewer-password")


def start_synced_server(var_dir: Path, kubeconfig: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Prepare the database in `var_dir`, then serve it with the watchers running inside."""
    subprocess.run(
        [sys.executable, "-m", "tests.browser.synced_server"],
        env=server_env(var_dir),
        cwd=Path(__file__).resolve().parents[2],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return start_server(var_dir, EMBEDDED_SYNC="1", KUBECONFIG=str(kubeconfig))


if __name__ == "__main__":
    main()
