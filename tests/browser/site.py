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


# A what-if with many copies: its result has copies per node, quota and stranded devices.
WHAT_IF_COPIES = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: training, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, count: 3}
"""


def run_what_if(page: Any, base: str, *, text: str = WHAT_IF_COPIES, count: str = "max") -> None:
    """Fill the what-if form in and press Run (a POST); waits for the result."""
    page.goto(base + "/what-if/")
    page.fill("#id_yaml", text)
    page.fill("#what-if-form input[name=count]", count)
    page.click("#what-if-form button[type=submit]")
    page.wait_for_selector("#what-if-result p", timeout=20_000)


def every_page(page: Any, base: str) -> dict[str, str]:
    """name → path of every list page, one detail page of each kind and a shared what-if
    answer (the what-if result as a GET)."""
    found = dict(LIST_PAGES)
    for name, listing, pattern in DETAIL_PAGES:
        page.goto(base + listing)
        found[name] = first_link(page, pattern)
    run_what_if(page, base)
    found["what-if-shared"] = page.locator("#what-if-share").get_attribute("href")
    found["not-found"] = "/no-such-page/"
    return found
