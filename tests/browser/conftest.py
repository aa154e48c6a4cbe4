"""A real server (console.serve, with websockets) and a real headless Chromium for browser tests.

The server runs in a subprocess on a free port with its own SQLite database, filled with a demo
cluster by `tests.browser.prepare`. Chromium is Debian's (`bin/system-deps` installs it);
Playwright drives it through `executable_path`, never a downloaded browser.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dralib.kube.fakeapi import FakeApiServer
from tests.browser.synced_server import start_synced_server
from tests.console.hostile_server import server_command, server_env, wait_until_answering
from tests.paths import ROOT, free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEMO_NODES = 12
DEMO_SEED = 7


class LiveServer:
    """The running server: its URL, the demo objects it holds, and a sync control."""

    def __init__(self, url: str, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.url = url
        self.objects = objects

    def sync(
        self, kind: str, objects: list[dict[str, Any]], *, deleted: bool = False
    ) -> dict[str, Any]:
        """Apply objects (watch events MODIFIED, or DELETED) through the server's sync path."""
        request = urllib.request.Request(
            f"{self.url}/__test__/sync",
            data=json.dumps({"kind": kind, "objects": objects, "deleted": deleted}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))


@pytest.fixture(scope="session")
def live_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run bin/system-deps (Debian chromium)")
    var_dir = tmp_path_factory.mktemp("browser-var")
    env = server_env(var_dir)
    prepared = subprocess.run(
        [sys.executable, "-m", "tests.browser.prepare", str(DEMO_NODES), str(DEMO_SEED)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
        timeout=300,
    )
    objects = json.loads(prepared.stdout)
    port = free_port()
    log = open(var_dir / "server.log", "wb")  # noqa: SIM115 - closed after the process ends
    server = subprocess.Popen(
        server_command(port, "tests.browser.asgi_app:application"),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(server, f"{url}/accounts/login/", log=var_dir / "server.log")
        yield LiveServer(url, objects)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture
def synced_url(cluster: FakeApiServer, tmp_path: Path) -> Iterator[str]:
    """A server whose embedded watchers sync the test module's `cluster` fixture, by its URL."""
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    server, port = start_synced_server(tmp_path, kubeconfig)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=20)


# Package scope: Playwright's sync API keeps an event loop running in this thread while it is
# open, which breaks the async tests that run after the browser tests.
@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any, live_server_url: LiveServer) -> Iterator[Any]:
    """A signed-in page (viewer persona) of a fresh browser context."""
    context = chromium.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.goto(f"{live_server_url.url}/accounts/login/")
    page.fill("#id_username", "viewer")
    page.fill("#id_password", "viewer-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server_url.url}/")
    yield page
    context.close()
