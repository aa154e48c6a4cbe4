"""Browser tests: every page in real headless Chromium, live updates, what-if, screenshots."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest

from demo.catalog import GPU_DRIVER
from tests.browser.conftest import ROOT, LiveServer
from tests.console.demo import allocate, pending_claim

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "docs" / "screenshots"
# How long to wait for what must happen (ms): generous, as on a loaded machine; how fast it
# happens is bin/bench's business.
WAIT = 20_000
PAGES = ["/", "/pools/", "/nodes/", "/claims/", "/templates/", "/quotas/", "/sync/", "/what-if/"]


def shoot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    # Written whole, then renamed: a test run beside this one never leaves half a file.
    partial = path.with_name(f".{name}.{os.getpid()}.png")
    page.screenshot(path=str(partial), full_page=True)
    os.replace(partial, path)
    return path


def first_link(page: Any, pattern: str) -> str:
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    return next(h for h in hrefs if re.fullmatch(pattern, h))


def test_every_page_renders_without_script_errors(page: Any, live_server_url: LiveServer) -> None:
    """Each list page and one of each detail page load with no JavaScript error."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base = live_server_url.url
    for path in PAGES:
        response = page.goto(base + path)
        assert response.status == 200, path
        assert page.locator("main h1").inner_text().strip(), path
    page.goto(base + "/pools/")
    pool = first_link(page, r"/pools/[^/?]+/[^?]+/")
    page.goto(base + pool)
    device = first_link(page, r"/devices/[^/?]+/[^?]+/[^/?]+/")
    page.goto(base + "/nodes/")
    node = first_link(page, r"/nodes/[^/]+/")
    page.goto(base + "/claims/?state=reserved")
    claim = first_link(page, r"/claims/[^/]+/[^/]+/")
    for path in (pool, device, node, claim):
        assert page.goto(base + path).status == 200, path
    assert errors == []


def test_overview_screenshot(page: Any, live_server_url: LiveServer) -> None:
    """The overview shows counts, per-driver bars and the chart, and goes live."""
    page.goto(live_server_url.url + "/")
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    assert page.locator(".chart svg polyline").count() >= 1
    assert int(page.locator("#stat-devices").inner_text()) > 0
    shoot(page, "overview")


def test_an_allocation_appears_on_an_open_pool_page(page: Any, live_server_url: LiveServer) -> None:
    """A claim allocated through the sync path recolours its device, no reload."""
    base = live_server_url.url
    page.goto(f"{base}/pools/?driver={GPU_DRIVER}")
    page.goto(base + first_link(page, r"/pools/[^/?]+/[^?]+/"))
    free = page.locator(".dev[data-state=free]").first
    device = free.get_attribute("data-device")
    assert device
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    page.evaluate("window.__marker = 'same document'")
    subtitle = page.locator(".topbar .sub .mono").inner_text()
    pool_name = page.locator("main h1").inner_text().removeprefix("Pool ").strip()
    claim = allocate(
        pending_claim(live_server_url.objects), driver=subtitle, pool=pool_name, device=device
    )
    answer = live_server_url.sync("ResourceClaim", [claim])
    assert answer["upserted"] == 1
    page.wait_for_selector(f'.dev[data-device="{device}"]:not([data-state=free])', timeout=WAIT)
    assert page.evaluate("window.__marker") == "same document"


def test_a_deleted_claims_open_page_says_so(page: Any, live_server_url: LiveServer) -> None:
    """The claim page open in a browser marks the claim deleted once the sync deletes it."""
    claim = copy.deepcopy(pending_claim(live_server_url.objects))
    metadata = claim["metadata"]
    metadata.update(name="doomed-claim", uid="00000000-0000-4000-8000-00000000d00d")
    assert live_server_url.sync("ResourceClaim", [claim])["upserted"] == 1
    page.goto(f"{live_server_url.url}/claims/{metadata['namespace']}/doomed-claim/")
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    assert page.locator(".gone-note").count() == 0
    assert live_server_url.sync("ResourceClaim", [claim], deleted=True)["deleted"] == 1
    note = page.wait_for_selector("#claim-body.gone .gone-note[role=alert]", timeout=WAIT)
    assert "Deleted from the cluster" in note.inner_text()
    # The last known state stays readable, and nothing refreshes the deleted object again.
    assert "doomed-claim" in page.locator("main").inner_text()
    assert page.locator("#claim-body[data-live]").count() == 0


def test_pool_screenshot(page: Any, live_server_url: LiveServer) -> None:
    """The largest GPU pool (partitioned, with shared counters) renders its grid and counters."""
    page.goto(f"{live_server_url.url}/pools/?driver={GPU_DRIVER}")
    href = page.evaluate(
        """() => {
          const rows = [...document.querySelectorAll('#pool-table tbody tr')];
          const size = r => parseInt(r.querySelectorAll('td')[5].innerText, 10);
          rows.sort((a, b) => size(b) - size(a));
          return rows[0].querySelector('a[href^="/pools/"]').getAttribute('href');
        }"""
    )
    page.goto(live_server_url.url + href)
    assert page.locator(".dev").count() > 8
    assert page.locator("text=Shared counters").count() == 1
    shoot(page, "pool")


def test_offline_indicator_and_reconnect(page: Any, live_server_url: LiveServer) -> None:
    """When the socket drops the header says offline, then the page reconnects by itself."""
    page.goto(live_server_url.url + "/")
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    page.evaluate("window.draLive.socket.close()")
    page.wait_for_selector("#live-status[data-state=offline]", timeout=WAIT)
    assert "Offline" in page.locator("#live-status").inner_text()
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    assert page.evaluate("window.draLive.attempt") == 0


def test_signed_out_page_stops_reconnecting(page: Any, live_server_url: LiveServer) -> None:
    """After signing out elsewhere the socket is refused: the badge says so and retries stop."""
    page.goto(live_server_url.url + "/")
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    page.context.clear_cookies()
    page.evaluate("window.draLive.socket.close()")
    page.wait_for_function("() => window.draLive.stopped === true", timeout=WAIT)
    status = page.locator("#live-status")
    assert "reload to sign in" in status.inner_text()
    assert status.get_attribute("data-state") == "offline"
    attempts = page.evaluate("window.draLive.attempt")
    page.wait_for_timeout(2500)
    assert page.evaluate("window.draLive.attempt") == attempts
    assert page.evaluate("window.draLive.socket.readyState") == 3  # CLOSED, no new socket


def test_refused_topic_stops_reconnecting(page: Any, live_server_url: LiveServer) -> None:
    """A topic the server refuses ends live updates with a reload hint instead of retrying."""
    page.goto(live_server_url.url + "/")
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    page.evaluate("document.body.setAttribute('data-live-topics', 'no-such-topic')")
    page.evaluate("window.draLive.socket.close()")
    page.wait_for_function("() => window.draLive.stopped === true", timeout=WAIT)
    assert "reload the page" in page.locator("#live-status").inner_text()
    assert "sign in" not in page.locator("#live-status").inner_text()


WHAT_IF = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: training, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: %s, count: %d}
"""


def run_what_if(page: Any, base: str, text: str) -> None:
    page.goto(base + "/what-if/")
    page.fill("#id_yaml", text)
    page.click("#what-if-form button[type=submit]")
    page.wait_for_selector("#what-if-result p")


def test_what_if_places_a_fitting_claim(page: Any, live_server_url: LiveServer) -> None:
    """A claim for two GPUs lists nodes and highlights the chosen devices in a pool grid."""
    run_what_if(page, live_server_url.url, WHAT_IF % (GPU_DRIVER, 2))
    assert page.locator("#what-if-fits").count() == 1
    assert page.locator("#what-if-nodes tbody tr").count() >= 1
    assert page.locator(".dev.chosen").count() == 2
    shoot(page, "what-if")


def test_what_if_explains_a_claim_that_cannot_fit(page: Any, live_server_url: LiveServer) -> None:
    """A claim for more GPUs than any node has says so and lists the reasons."""
    run_what_if(page, live_server_url.url, WHAT_IF % (GPU_DRIVER, 24))
    assert page.locator("#what-if-nofit").count() == 1
    assert page.locator("#diagnosis-reasons li").count() >= 1


def test_what_if_form_reports_bad_input(page: Any, live_server_url: LiveServer) -> None:
    """Submitting a non-claim shows an error naming the field, in the page."""
    run_what_if(page, live_server_url.url, "kind: [")
    assert page.locator("#what-if-error").inner_text().strip()
