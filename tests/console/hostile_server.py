"""A real server process, e.g. over a cluster where one what-if searches for minutes.

`python -m tests.console.hostile_server` (with DASHBOARD_VAR_DIR set) migrates a fresh SQLite
database, loads `hostile_cluster` and prints an API token (test_shutdown); `start_server` runs
the web server as `bin/run` does (`python -m console.serve`), on that database or on none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.paths import ROOT, free_port


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from tests.claims.whatif.conftest import load_objects
    from tests.claims.whatif.test_budget import hostile_cluster

    call_command("migrate", verbosity=0)

    from inventory.clusters import in_cluster

    with in_cluster():
        user = User.objects.create_user("searcher", password="searcher-password-long-enough")
        load_objects(hostile_cluster(nodes=3))
        print(Token.objects.create(user=user).key)


def server_env(var_dir: Path, **settings: str) -> dict[str, str]:
    """This environment without DASHBOARD_* (the test run's database), plus `settings`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("DASHBOARD_") and key != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        DASHBOARD_VAR_DIR=str(var_dir),
        DASHBOARD_SECRET_KEY="shutdown-test-secret-" + "x" * 32,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        PYTHONPATH=str(ROOT),
        **{f"DASHBOARD_{key}": value for key, value in settings.items()},
    )
    return env


def prepare(var_dir: Path) -> str:
    """Migrate and fill the database in `var_dir`; returns an API token."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.console.hostile_server"],
        cwd=ROOT,
        env=server_env(var_dir),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return done.stdout.strip().splitlines()[-1]


def server_command(port: int, app: str = "console.asgi:application") -> list[str]:
    """The web server on 127.0.0.1:`port`, started as `bin/run` starts it."""
    return [sys.executable, "-m", "console.serve", "--host", "127.0.0.1", "--port", str(port), app]


def start_server(var_dir: Path, **settings: str) -> tuple[subprocess.Popen[bytes], int]:
    """The web server on a free port over the prepared database, once it answers /healthz.

    Its output goes to `var_dir/server-<port>.log`.
    """
    port = free_port()
    log = open(var_dir / f"server-{port}.log", "wb")  # noqa: SIM115 - the process owns it
    server = subprocess.Popen(
        server_command(port),
        cwd=ROOT,
        env=server_env(var_dir, **settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        # Any answer will do: /healthz says 503 (not ready) when no sync runs.
        wait_until_answering(
            server, f"http://127.0.0.1:{port}/healthz", log=var_dir / f"server-{port}.log"
        )
    except RuntimeError:
        server.kill()
        raise
    return server, port


def wait_until_answering(
    server: subprocess.Popen[bytes], url: str, *, log: Path, seconds: float = 30
) -> None:
    """Return once `url` answers, with any status; RuntimeError carrying the server's `log` if
    the process ends first or nothing answers within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"the server did not start: {log.read_text()}") from None
            time.sleep(0.2)


if __name__ == "__main__":
    main()
