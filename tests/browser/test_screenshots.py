"""Screenshots of every page at 1440 px and 390 px into docs/screenshots/ (bin/screenshots)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import LiveServer
from tests.browser.site import every_page, run_what_if
from tests.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.screenshots]

SCREENSHOTS = ROOT / "docs" / "screenshots"
WIDTHS = {"desktop": {"width": 1440, "height": 1000}, "phone": {"width": 390, "height": 844}}


def save(page: Any, target: Path) -> None:
    """Screenshot into `target`, written whole and then renamed: a run beside this one never
    leaves half a file."""
    partial = target.with_name(f".{target.stem}.{os.getpid()}.png")
    page.screenshot(path=str(partial), full_page=True)
    os.replace(partial, target)


@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_screenshot_every_page(page: Any, live_server_url: LiveServer, device: str) -> None:
    """Every page renders and is saved as `<page>-<device>.png`."""
    base = live_server_url.url
    pages = every_page(page, base)
    page.set_viewport_size(WIDTHS[device])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, path in pages.items():
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        target = SCREENSHOTS / f"{name}-{device}.png"
        save(page, target)
        assert target.stat().st_size > 0


@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_screenshot_a_what_if_with_copies(
    page: Any, live_server_url: LiveServer, device: str
) -> None:
    """A what-if run for as many copies as fit (a POST) shows copies per node, their devices
    and the stranded GPUs; its share link shows the kept answer with Run again now."""
    page.set_viewport_size(WIDTHS[device])
    run_what_if(page, live_server_url.url)
    page.wait_for_selector("#what-if-copies", timeout=20_000)
    copies = page.locator("#what-if-copies").inner_text()
    assert "most that fit" in copies and "10,000 asked" not in copies
    assert page.locator("#what-if-nodes tbody tr td.mono div").count() >= 1
    save(page, SCREENSHOTS / f"what-if-copies-{device}.png")
    link = page.locator("#what-if-share").get_attribute("href")
    assert link.startswith("/what-if/shared/")
    page.goto(live_server_url.url + link)
    # every_page's what-if-shared screenshot is this page.
    assert page.locator("#what-if-rerun button").inner_text().strip() == "Run again now"
