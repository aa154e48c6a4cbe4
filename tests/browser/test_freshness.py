"""The header says how current the data is, live: a killed API server turns an open page stale.

The issue: with the API server killed every header kept saying "● Live" (the socket was open)
for minutes while /readyz said 503. Here a real server syncs a fake API server with its embedded
watchers; a signed-in page shows "synced N s ago"; the fake API server is stopped and the same
page, without a reload, turns "stale: ..." with the banner, while its socket stays connected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dralib.kube.fakeapi import FakeApiServer
from tests.inventory.sync import objects

pytestmark = pytest.mark.browser

# How long to wait for what must happen (ms): generous, as on a loaded machine. The product
# turns the badge within a few seconds: the failing watch publishes `sync` at once, and the
# page polls /freshness/ every 5 s besides.
WAIT = 60_000


@pytest.fixture
def cluster() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=1.0) as server:
        server.apply(objects.device_class("gpu.example.com"))
        for i in range(3):
            server.apply(objects.node(f"node-{i}"))
            server.apply(objects.resource_slice(f"node-{i}-gpu", node_name=f"node-{i}"))
        yield server


def sign_in(chromium: Any, base: str) -> Any:
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "viewer")
    page.fill("#id_password", "viewer-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def test_a_killed_api_server_turns_the_open_page_stale(
    chromium: Any, synced_url: str, cluster: FakeApiServer
) -> None:
    """Synced: "synced N s ago", no banner. API server stopped: the badge and banner say stale
    and why, without a reload; the socket indicator stays connected (it is not the data's)."""
    page = sign_in(chromium, synced_url)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{synced_url}/pools/")
    page.wait_for_selector("#sync-status[data-state=live]", timeout=WAIT)
    assert page.locator("#sync-status").inner_text().startswith("synced ")
    assert page.locator("#freshness-banner").is_hidden()
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)

    cluster.stop()
    page.wait_for_selector("#sync-status[data-state=stale]", timeout=WAIT)
    badge = page.locator("#sync-status").inner_text()
    assert badge.startswith("stale: ") and "failing since" in badge, badge
    banner = page.locator("#freshness-banner")
    banner.wait_for(state="visible", timeout=WAIT)
    assert banner.inner_text().startswith("The data shown may be out of date")
    assert page.locator("#live-status").get_attribute("data-state") == "online"

    cluster.start()
    page.wait_for_selector("#sync-status[data-state=live]", timeout=WAIT)
    banner.wait_for(state="hidden", timeout=WAIT)
    assert errors == []
    page.context.close()
