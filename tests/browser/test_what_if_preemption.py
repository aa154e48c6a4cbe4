"""What-if preemption in real Chromium: tick "Consider preemption", run, read who would go."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from claims.whatif.resources import amount
from tests.browser.conftest import LiveServer

pytestmark = pytest.mark.browser


def test_the_page_names_the_pods_preemption_would_evict(
    page: Any, live_server_url: LiveServer
) -> None:
    """On a demo node filled by a low-priority pod, a high-priority pod pinned there fits only
    if that pod goes: the page says so, names the node and lists the pod."""
    node = next(
        n for n in live_server_url.objects["Node"] if not (n.get("spec") or {}).get("taints")
    )
    name = node["metadata"]["name"]
    millis = int(amount(node["status"]["allocatable"]["cpu"]) * 1000)
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "browser-high", "uid": "uid-browser-high"},
        "value": 1_000_000,
    }
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "browser-filler", "namespace": "default", "uid": "uid-filler"},
        "spec": {
            "nodeName": name,
            "priority": -10,
            "containers": [{"name": "app", "resources": {"requests": {"cpu": f"{millis // 2}m"}}}],
        },
        "status": {"phase": "Running"},
    }
    asking = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "urgent", "namespace": "default"},
        "spec": {
            "priorityClassName": "browser-high",
            "nodeSelector": {"kubernetes.io/hostname": name},
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": f"{millis // 2 + 1}m"}}}
            ],
        },
    }
    live_server_url.sync("PriorityClass", [high])
    live_server_url.sync("Pod", [filler])
    try:
        page.goto(live_server_url.url + "/what-if/")
        page.fill("#id_yaml", yaml.safe_dump(asking))
        page.check("input[name=preemption]")
        page.click("#what-if-form button[type=submit]")
        page.wait_for_selector("#what-if-preemption")
        text = page.locator("#what-if-preemption").inner_text()
        assert "Fits if" in text and "preempted" in text
        assert page.locator("#what-if-preemption a", has_text=name).count() == 1
        assert page.locator("#what-if-victims td", has_text="default/browser-filler").count() == 1
        assert page.locator("input[name=preemption]").is_checked()
    finally:
        live_server_url.sync("Pod", [filler], deleted=True)
        live_server_url.sync("PriorityClass", [high], deleted=True)
