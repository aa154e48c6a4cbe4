"""Accessibility and small screens: axe-core finds nothing serious on any page, and no page
scrolls sideways at 390 px."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.browser.conftest import LiveServer
from tests.browser.site import every_page, run_what_if
from tests.paths import ROOT

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Serious and critical axe-core violations of the page as loaded."""
    assert AXE.exists(), f"{AXE} is missing: run bin/test, which installs axe-core with npm"
    # Evaluated through the DevTools protocol: the pages' CSP forbids inline script tags.
    page.evaluate(AXE.read_text())
    found = page.evaluate(
        """async () => {
          const result = await axe.run(document, {resultTypes: ['violations']});
          return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
        }"""
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


def test_no_serious_accessibility_violation_on_any_page(
    page: Any, live_server_url: LiveServer
) -> None:
    """axe-core reports no serious or critical violation on any page, wide or narrow."""
    base = live_server_url.url
    pages = every_page(page, base)
    problems = {}
    for size in ({"width": 1440, "height": 1000}, PHONE):
        page.set_viewport_size(size)
        for name, path in pages.items():
            page.goto(base + path)
            found = axe_violations(page)
            if found:
                problems[f"{name} @{size['width']}"] = found
    assert problems == {}, json.dumps(problems, indent=1)


def test_no_page_scrolls_sideways_on_a_phone(page: Any, live_server_url: LiveServer) -> None:
    """At 390 px every page fits its width; wide tables scroll inside their own box."""
    base = live_server_url.url
    pages = every_page(page, base)
    page.set_viewport_size(PHONE)
    wide = {}
    for name, path in pages.items():
        page.goto(base + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[name] = width
    assert wide == {}


@pytest.mark.parametrize("size", [{"width": 1440, "height": 1000}, PHONE], ids=["wide", "phone"])
def test_the_what_if_result_is_accessible_and_fits_a_phone(
    page: Any, live_server_url: LiveServer, size: dict[str, int]
) -> None:
    """The result of a Run (a POST, so no page list reaches it) has no serious axe violation,
    and at 390 px it does not scroll sideways."""
    page.set_viewport_size(size)
    run_what_if(page, live_server_url.url)
    assert page.locator("#what-if-copies").count() == 1
    assert page.locator("#what-if-share").count() == 1
    assert axe_violations(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]


def test_the_phone_navigation_is_one_row_and_a_menu(page: Any, live_server_url: LiveServer):
    """At 390 px the navigation is the brand and a Menu disclosure in one row; opening it shows
    every link. Wide screens show the links and no Menu."""
    page.goto(live_server_url.url + "/claims/")
    links = page.locator("nav[aria-label=Main] a")
    assert links.first.is_visible() and not page.locator("#nav-menu > summary").is_visible()
    page.set_viewport_size(PHONE)
    page.goto(live_server_url.url + "/claims/")
    menu = page.locator("#nav-menu > summary")
    row = page.evaluate("document.querySelector('.sidebar').getBoundingClientRect().height")
    line = page.evaluate("document.querySelector('.sidebar .brand').getBoundingClientRect().height")
    assert menu.is_visible() and not links.first.is_visible()
    # One row: the bar is no taller than its tallest item plus its padding.
    assert row <= max(line, menu.bounding_box()["height"]) + 16
    menu.click()
    assert all(links.nth(i).is_visible() for i in range(links.count()))
    assert page.locator("nav a[aria-current=page]").inner_text().strip() == "Claims"


@pytest.mark.parametrize("path", ["/nodes/", "/pools/"])
def test_free_units_stay_in_view_on_a_phone(page: Any, live_server_url: LiveServer, path: str):
    """At 390 px the node and pool lists show their name and Free units columns without
    scrolling the table; the columns left out are there on wide screens."""
    page.set_viewport_size(PHONE)
    page.goto(live_server_url.url + path)
    headers = page.locator("main table thead th")
    shown = [
        headers.nth(i).inner_text().split("\n")[0].strip().lower()
        for i in range(headers.count())
        if headers.nth(i).is_visible() and headers.nth(i).bounding_box()["x"] + 2 < PHONE["width"]
    ]
    right = max(
        headers.nth(i).bounding_box()["x"] + headers.nth(i).bounding_box()["width"]
        for i in range(headers.count())
        if headers.nth(i).is_visible()
    )
    assert any(label.startswith("free") for label in shown), shown
    assert right <= PHONE["width"], shown
    page.set_viewport_size({"width": 1440, "height": 1000})
    assert all(headers.nth(i).is_visible() for i in range(headers.count()))


def test_a_partitioned_pool_is_one_tab_stop_per_gpu(page: Any, live_server_url: LiveServer):
    """On a MIG pool Tab walks the GPUs (one summary per counter set), not every partition;
    Enter opens one and its partitions' links are reachable then."""
    base = live_server_url.url
    page.goto(base + "/pools/")
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    pools = [h for h in hrefs if re.fullmatch(r"/pools/[^/?]+/[^?]+/", h)]
    for href in pools:
        page.goto(base + href)
        if page.locator("details.devgroup").count() > 1:
            break
    else:
        raise AssertionError(f"no partitioned pool among the {len(pools)} pools listed")
    groups = page.locator("details.devgroup")
    tabbable = page.evaluate(
        """() => [...document.querySelectorAll('.devgroups a, .devgroups summary')]
             .filter(e => e.checkVisibility()).length"""
    )
    flat = page.evaluate(
        """() => [...document.querySelectorAll('.devgroups > .devgrid a')]
             .filter(e => e.checkVisibility()).length"""
    )
    assert tabbable == groups.count() + flat
    first = groups.nth(0).locator("summary")
    first.focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.parentElement.dataset.counterSet") == (
        groups.nth(1).get_attribute("data-counter-set")
    )
    first.focus()
    page.keyboard.press("Enter")
    assert groups.nth(0).get_attribute("open") is not None
    assert groups.nth(0).locator(".dev a.dev-name").first.is_visible()


def test_navigation_marks_the_current_page(page: Any, live_server_url: LiveServer) -> None:
    """The nav link of the current section carries aria-current, and the skip link works."""
    page.goto(live_server_url.url + "/claims/")
    current = page.locator("nav a[aria-current=page]")
    assert current.count() == 1 and current.inner_text().strip() == "Claims"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"


def test_device_tiles_have_names_and_shared_differs_by_more_than_colour(
    page: Any, live_server_url: LiveServer
) -> None:
    """Every device tile has an accessible name, and allocated and shared tiles show a glyph."""
    base = live_server_url.url
    page.goto(base + "/pools/")
    from tests.browser.site import first_link

    page.goto(base + first_link(page, r"/pools/[^/?]+/[^?]+/"))
    unnamed = page.eval_on_selector_all(
        ".dev", "els => els.filter(e => !(e.getAttribute('aria-label') || '').trim()).length"
    )
    assert page.locator(".dev").count() > 0 and unnamed == 0
    glyphs = page.evaluate(
        """() => ['allocated', 'shared'].map(state => {
          const probe = document.createElement('a');
          probe.className = 'dev ' + state;
          document.body.appendChild(probe);
          const glyph = getComputedStyle(probe, '::after').content;
          probe.remove();
          return glyph;
        })"""
    )
    assert all(g not in ("none", "normal", "") for g in glyphs) and glyphs[0] != glyphs[1]
    free = page.locator(".dev.free").first
    border = free.evaluate("e => getComputedStyle(e).borderTopColor")
    panel = free.evaluate("e => getComputedStyle(e.closest('.card')).backgroundColor")
    assert contrast(border, panel) >= 3.0, (border, panel)


def _luminance(css: str) -> float:
    red, green, blue = (int(v) / 255 for v in re.findall(r"\d+", css)[:3])
    linear = [
        c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (red, green, blue)
    ]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""
    high, low = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_relative_times_tick(page: Any, live_server_url: LiveServer) -> None:
    """Ages are rendered by the page's script from the time stamp, in words."""
    page.goto(live_server_url.url + "/pods/")
    first = page.locator("time.ago").first
    assert first.get_attribute("datetime")
    assert first.inner_text().endswith("ago") or first.inner_text() == "just now"
