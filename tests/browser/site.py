"""Every page of the console, as paths found by browsing the demo cluster like a user would."""

from __future__ import annotations

import re
from typing import Any

LIST_PAGES = {
    "overview": "/",
    "pools": "/pools/",
    "devices": "/devices/",
    "device-classes": "/device-classes/",
    "taint-rules": "/taint-rules/",
    "nodes": "/nodes/",
    "claims": "/claims/",
    "templates": "/templates/",
    "pods": "/pods/",
    "quotas": "/quotas/",
    "resource-classes": "/resource-classes/",
    "scheduling-contexts": "/scheduling-contexts/",
    "what-if": "/what-if/",
    "sync": "/sync/",
    "search": "/search/?q=gpu",
    "leaks": "/leaks/",
}
# Detail pages: (name, list page, the first link on it that matches).
DETAIL_PAGES = (
    ("pool", "/pools/", r"/pools/[^/?]+/[^?]+/"),
    ("device", "/devices/", r"/devices/[^/?]+/[^?]+/[^/?]+/"),
    ("device-class", "/device-classes/", r"/device-classes/[^/?]+/"),
    ("node", "/nodes/", r"/nodes/[^/?]+/"),
    ("claim", "/claims/?state=reserved", r"/claims/[^/?]+/[^/?]+/"),
    ("pending-claim", "/claims/?state=pending", r"/claims/[^/?]+/[^/?]+/"),
    ("pod", "/pods/", r"/pods/[^/?]+/[^/?]+/"),
    ("template", "/templates/", r"/templates/[^/?]+/[^/?]+/"),
)


def first_link(page: Any, pattern: str) -> str:
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    return next(h for h in hrefs if re.fullmatch(pattern, h))


def every_page(page: Any, base: str) -> dict[str, str]:
    """name → path of every list page and one detail page of each kind."""
    found = dict(LIST_PAGES)
    for name, listing, pattern in DETAIL_PAGES:
        page.goto(base + listing)
        found[name] = first_link(page, pattern)
    found["not-found"] = "/no-such-page/"
    return found
