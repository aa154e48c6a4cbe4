"""Starts the test OpenID provider (`provider.mjs`, panva's oidc-provider) and signs in through
its own login and consent pages over HTTP, as a browser would.

`bin/test` installs the provider with `npm ci` into tests/oidc/node_modules (package-lock.json
pins it and every dependency).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from tests.paths import free_port

HERE = Path(__file__).resolve().parent
CLIENT_ID = "dra-dashboard"
CLIENT_SECRET = "test-client-secret+with:odd%characters"


@dataclass
class Provider:
    """A running provider: its issuer URL and the accounts file it reads at every sign-in."""

    issuer: str
    accounts_file: Path

    def set_accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        self.accounts_file.write_text(json.dumps(accounts))


@contextmanager
def running_provider(
    directory: Path,
    *,
    redirect_uri: str,
    post_logout_uri: str,
    accounts: dict[str, Any],
    avoid: int = 0,
) -> Iterator[Provider]:
    """The provider on a free loopback port (not `avoid`, a port already promised to someone),
    for one client whose callback is `redirect_uri`."""
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError("the test OpenID provider is not installed: run bin/test (npm ci)")
    port = free_port()
    while port == avoid:
        port = free_port()
    accounts_file = directory / "accounts.json"
    accounts_file.write_text(json.dumps(accounts))
    config = directory / "provider.json"
    config.write_text(
        json.dumps(
            {
                "port": port,
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [redirect_uri],
                "post_logout_redirect_uris": [post_logout_uri],
                "accounts_file": str(accounts_file),
            }
        )
    )
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is missing: run bin/system-deps")
    process = subprocess.Popen(
        [node, str(HERE / "provider.mjs"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:  # ends when the process does
            seen.append(line)
            if line.startswith("listening "):
                break
        else:
            raise RuntimeError(f"the OpenID provider did not start: {''.join(seen)}")
        yield Provider(issuer=line.split()[1], accounts_file=accounts_file)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _form(page: requests.Response) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of the first form on a provider page."""
    found = re.search(r'<form[^>]*action="([^"]+)"', page.text)
    if found is None:
        raise AssertionError(f"no form on {page.url}: {page.text[:500]}")
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    return urljoin(page.url, unescape(found.group(1))), hidden


def sign_in(session: requests.Session, start: str, login: str) -> requests.Response:
    """Follow `start` (the dashboard's "Sign in with …" link) through the provider's login and
    consent forms; the answer is the page the dashboard finally lands on."""
    page = session.get(start, timeout=10)
    page.raise_for_status()
    action, fields = _form(page)
    assert fields.get("prompt") == "login", page.text[:500]
    page = session.post(action, data={**fields, "login": login, "password": "any"}, timeout=10)
    page.raise_for_status()
    if "prompt" in page.text and 'value="consent"' in page.text:
        action, fields = _form(page)
        page = session.post(action, data=fields, timeout=10)
    return page
