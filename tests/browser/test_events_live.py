"""A waiting pod's scheduler events and its claim's diagnosis, end to end in Chromium.

A real server syncs a fake API server with its embedded watchers. The pending claim's page,
opened with no diagnosis made before, shows why it waits and names the claims (and pods) that
hold the node's GPUs; the waiting pod's page, open in the browser, shows the scheduler's
FailedScheduling event once the fake API server records it, without a reload.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from dralib.kube.fakeapi import FakeApiServer
from tests.browser.test_freshness import sign_in
from tests.inventory.sync import objects

pytestmark = pytest.mark.browser

WAIT = 60_000
NAMESPACE = "team"
VIEW = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "pods-and-claims-reader"},
    "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]},
    ],
}
VIEWER_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "viewer-reads"},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": VIEW["metadata"]["name"],
    },
    "subjects": [{"kind": "User", "name": "viewer", "apiGroup": "rbac.authorization.k8s.io"}],
}


def held(name: str, device: str) -> dict[str, Any]:
    claim = objects.resource_claim(NAMESPACE, name, device_class_name=objects.DRIVER)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": objects.DRIVER, "pool": "node-0", "device": device}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": f"uid-{name}-pod"}],
    }
    return claim


@pytest.fixture
def cluster() -> Iterator[FakeApiServer]:
    """One node of two GPUs, both held by running pods' claims; a third pod waits for a GPU."""
    with FakeApiServer(bookmark_interval=1.0) as server:
        server.load_rbac([VIEW, VIEWER_BINDING])
        server.apply(objects.device_class(objects.DRIVER))
        server.apply(objects.node("node-0"))
        server.apply(objects.resource_slice("node-0-gpu", node_name="node-0"))
        for index in (0, 1):
            name = f"holder-{index}"
            server.apply(held(name, f"gpu-{index}"))
            running = objects.pod(NAMESPACE, f"{name}-pod", claim=name)
            running["spec"]["nodeName"] = "node-0"
            running["status"]["phase"] = "Running"
            server.apply(running)
        server.apply(
            objects.resource_claim(NAMESPACE, "wants-gpu", device_class_name=objects.DRIVER)
        )
        server.apply(objects.pod(NAMESPACE, "waiter", claim="wants-gpu"))
        yield server


def open_when_synced(page: Any, url: str) -> None:
    """Open `url`, again until the sync has stored what it shows (a 404 before)."""
    deadline = time.monotonic() + WAIT / 1000
    while True:
        response = page.goto(url)
        if response is not None and response.status == 200:
            return
        assert time.monotonic() < deadline, f"{url} never synced"
        page.wait_for_timeout(500)


def failed_scheduling() -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "waiter.17f1", "namespace": NAMESPACE},
        "eventTime": now,
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-node-0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "note": "0/1 nodes are available: 1 cannot allocate all claims.",
        "regarding": {"kind": "Pod", "namespace": NAMESPACE, "name": "waiter", "apiVersion": "v1"},
    }


def test_claim_diagnosis_and_live_pod_events(
    chromium: Any, synced_url: str, cluster: FakeApiServer
) -> None:
    """The pending claim's page names both holders and their pods; the open pod page shows the
    scheduler's event as soon as it is recorded."""
    page = sign_in(chromium, synced_url)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # Everything the diagnosis reads is stored: the node's pool, the pods, the claims.
    open_when_synced(page, f"{synced_url}/pools/{objects.DRIVER}/node-0/")
    open_when_synced(page, f"{synced_url}/nodes/node-0/")
    open_when_synced(page, f"{synced_url}/pods/{NAMESPACE}/waiter/")
    open_when_synced(page, f"{synced_url}/claims/{NAMESPACE}/wants-gpu/")
    page.wait_for_selector("#pending-nofit", timeout=WAIT)
    holders = page.locator("table.holders")
    for index in (0, 1):
        claim_link = holders.locator(f'a[href="/claims/{NAMESPACE}/holder-{index}/"]')
        pod_link = holders.locator(f'a[href="/pods/{NAMESPACE}/holder-{index}-pod/"]')
        assert claim_link.count() >= 1 and pod_link.count() >= 1
    assert "No diagnosis" not in page.content()

    open_when_synced(page, f"{synced_url}/pods/{NAMESPACE}/waiter/")
    assert page.locator("#pod-events tr.event").count() == 0
    page.wait_for_selector("#live-status[data-state=online]", timeout=WAIT)
    cluster.apply(failed_scheduling())
    row = page.wait_for_selector('#pod-events tr[data-reason="FailedScheduling"]', timeout=WAIT)
    assert row is not None
    text = row.inner_text()
    assert "default-scheduler" in text and "cannot allocate all claims" in text
    assert errors == []
