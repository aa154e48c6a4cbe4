"""The dashboard's web server (console.serve) signing people in through the test OpenID provider:
both on loopback, the dashboard on its own SQLite database with one local account."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.console.hostile_server import server_command, server_env, wait_until_answering
from tests.oidc.provider import CLIENT_ID, CLIENT_SECRET, Provider, running_provider
from tests.paths import ROOT, free_port

ACCOUNTS = {
    "alice": {"email": "alice@example.com", "groups": ["team-a"]},
    "bob": {"email": "bob@example.com", "groups": ["team-b"]},
    "carol": {"email": "carol@example.com", "groups": ["team-a"]},
}
# A local account named like one of the provider's people.
LOCAL_USER = ("carol", "carol-local-password")
PROVIDER_NAME = "Example SSO"
SESSION_SECONDS = 3600
# The header's name beside the sign-out button.
SIGNED_IN_AS = r'<span>([^<]+)</span>\s*<form method="post" action="/accounts/logout/'


@dataclass
class Site:
    url: str
    provider: Provider
    database: Path

    def identity(self, username: str) -> dict[str, object]:
        """What the dashboard's database holds for `username`: groups, flags, password."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            row = db.execute(
                "SELECT id, is_staff, is_superuser, password, email FROM auth_user"
                " WHERE username = ?",
                (username,),
            ).fetchone()
            assert row is not None, f"no user {username}"
            groups = [
                name
                for (name,) in db.execute(
                    "SELECT g.name FROM auth_group g JOIN auth_user_groups ug"
                    " ON ug.group_id = g.id WHERE ug.user_id = ? ORDER BY g.name",
                    (row[0],),
                )
            ]
        return {
            "groups": groups,
            "is_staff": bool(row[1]),
            "is_superuser": bool(row[2]),
            "usable_password": not str(row[3]).startswith("!"),
            "email": row[4],
        }

    def signed_in_as(self, session: requests.Session) -> str | None:
        """The username the dashboard's header shows for this session, or None."""
        page = session.get(f"{self.url}/", allow_redirects=False, timeout=10)
        if page.status_code != 200:
            return None
        found = re.search(SIGNED_IN_AS, page.text)
        return found.group(1) if found else None


def _manage(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")


@contextmanager
def oidc_site(var_dir: Path, provider_dir: Path, **settings: Any) -> Iterator[Site]:
    """The provider, then the dashboard configured for it by DASHBOARD_OIDC_* variables.

    Usernames are the provider's account names (preferred_username, no prefix) and groups as
    they are, so alice is "alice" in "team-a"; members of platform-admins are admins.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running_provider(
        provider_dir,
        redirect_uri=f"{url}/accounts/oidc/callback/",
        post_logout_uri=f"{url}/accounts/login/",
        accounts=ACCOUNTS,
        avoid=port,
    ) as provider:
        env = server_env(
            var_dir,
            OIDC_ISSUER=provider.issuer,
            OIDC_CLIENT_ID=CLIENT_ID,
            OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_SCOPES="openid email profile groups",
            OIDC_USERNAME_CLAIM="preferred_username",
            OIDC_USERNAME_PREFIX="-",
            OIDC_PROVIDER_NAME=PROVIDER_NAME,
            OIDC_ADMIN_GROUPS="platform-admins",
            OIDC_SESSION_SECONDS=str(SESSION_SECONDS),
            # The tests' bad callbacks must not lock their own address out.
            LOGIN_MAX_ADDRESS_FAILURES="1000",
            **settings,
        )
        _manage(env, "migrate", "--verbosity", "0")
        _manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth.models import User;"
            f"User.objects.create_user({LOCAL_USER[0]!r}, password={LOCAL_USER[1]!r})",
        )
        log_path = var_dir / "server.log"
        with open(log_path, "wb") as log:
            server = subprocess.Popen(
                server_command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_until_answering(server, f"{url}/accounts/login/", log=log_path)
            yield Site(url=url, provider=provider, database=var_dir / "dashboard.sqlite3")
        finally:
            server.terminate()
            server.wait(timeout=10)
        assert " 500 " not in log_path.read_text(), "the dashboard answered 500"
