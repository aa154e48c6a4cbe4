"""Pool device counts and leaks are kept between pages and scrapes: what a page then asks does not
grow with the cluster, and after a change the kept figures equal a computation from scratch."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from claims.devices.classes import class_membership, held_and_tainted
from claims.devices.counts import (
    pool_device_counts,
    unavailable_unhealthy,
    warm_counts,
)
from claims.devices.states import json_text
from claims.leaks import find_leaks
from dralib.allocator import cel
from inventory.sync import upsert_events
from tests.claims.devices.kept import forget_kept, fresh  # noqa: F401 (fresh: autouse)
from tests.console.demo import load_demo

JSON = dict[str, Any]
# Every page whose cost the issue bounds at 5,000 nodes, besides the overview
# (tests/console/test_pages.py counts its queries).
PAGES = ("/api/inventory/pool-status/?limit=1000", "/metrics", "/leaks/", "/")


def _scratch() -> tuple[dict, dict, list]:
    forget_kept()
    return pool_device_counts(), unavailable_unhealthy(), find_leaks()


def _bump(obj: JSON, version: int) -> JSON:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def _reporting(pod: JSON, resource_id: str) -> JSON:
    """The pod, running, with the kubelet reporting the device `resource_id` Unhealthy."""
    pod = _bump(pod, 99_999_001)
    status = pod.setdefault("status", {})
    status["phase"] = "Running"
    status["containerStatuses"] = [
        {
            "name": "main",
            "ready": True,
            "state": {"running": {"startedAt": "2026-06-01T10:00:00Z"}},
            "allocatedResourcesStatus": [
                {
                    "name": "claim:gpus/gpu",
                    "resources": [{"resourceID": resource_id, "health": "Unhealthy"}],
                }
            ],
        }
    ]
    return pod


@pytest.mark.django_db
def test_kept_counts_follow_claims_rules_and_pods_as_from_scratch() -> None:
    """A released claim, a NoExecute taint rule and a pod reporting a device Unhealthy each move
    the kept counts at once, to what a computation from scratch says."""
    objects = load_demo(nodes=5, seed=1)
    before = pool_device_counts()
    allocated = next(
        c for c in objects["ResourceClaim"] if (c.get("status") or {}).get("allocation")
    )
    result = allocated["status"]["allocation"]["devices"]["results"][0]
    held_pool = (result["driver"], result["pool"])
    released = _bump(allocated, 99_999_000)
    released["status"] = {}
    upsert_events("ResourceClaim", [(released, None)], publish=False)
    after_release = pool_device_counts()
    assert after_release[held_pool]["allocated"] < before[held_pool]["allocated"]
    assert (after_release, unavailable_unhealthy(), find_leaks()) == _scratch()

    free = next(
        key
        for key, pk in class_membership().keys.items()
        if (key[0], key[1]) != held_pool and key[0] == "gpu.example.com"
    )
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "evict", "uid": "uid-evict", "resourceVersion": "1"},
        "spec": {
            "deviceSelector": {"driver": free[0], "pool": free[1], "device": free[2]},
            "taint": {"key": "example.com/evict", "effect": "NoExecute"},
        },
    }
    upsert_events("DeviceTaintRule", [(rule, None)], publish=False)
    tainted = pool_device_counts()[(free[0], free[1])]
    assert tainted["unhealthy"] == after_release[(free[0], free[1])]["unhealthy"] + 1
    assert (pool_device_counts(), unavailable_unhealthy(), find_leaks()) == _scratch()

    # A device neither held nor tainted, reported Unhealthy by a running pod: unavailable too.
    membership = class_membership()
    held, _, tainted_pks = held_and_tainted(membership)
    unheld = next(
        key
        for key, pk in membership.keys.items()
        if (key[0], key[1]) not in (held_pool, (free[0], free[1]))
        and pk not in held | tainted_pks
        and pool_device_counts()[(key[0], key[1])]["unhealthy"] == 0
    )
    before_report = unavailable_unhealthy().get((unheld[0], unheld[1]), 0)
    pod = _reporting(objects["Pod"][0], "/".join(unheld))
    upsert_events("Pod", [(pod, None)], publish=False)
    reported = pool_device_counts()[(unheld[0], unheld[1])]
    assert reported["unhealthy"] == 1
    assert unavailable_unhealthy()[(unheld[0], unheld[1])] == before_report + 1
    assert (pool_device_counts(), unavailable_unhealthy(), find_leaks()) == _scratch()


@pytest.mark.django_db
def test_pages_ask_as_many_queries_at_20_nodes_as_at_5(viewer_client) -> None:
    """After the web process's warm-up, the overview, pool-status, /metrics and /leaks/ make the
    same number of queries at 20 nodes as at 5, and evaluate no CEL: what they read is kept."""
    asked: dict[int, dict[str, int]] = {}
    for nodes, seed in ((5, 1), (20, 2)):
        load_demo(nodes=nodes, seed=seed)
        warm_counts()
        find_leaks()
        evaluated = cel.evaluations()
        asked[nodes] = {}
        for path in PAGES:
            with CaptureQueriesContext(connection) as queries:
                assert viewer_client.get(path).status_code == 200, path
            asked[nodes][path] = len(queries)
        assert cel.evaluations() == evaluated
    assert asked[20] == asked[5]
    # The fingerprints, the page's own small reads and the session: no read of every device,
    # pool or claim.
    assert max(asked[20].values()) <= 16


def test_json_text_reads_integers_past_64_bits_exactly() -> None:
    """orjson would read a 70-bit integer as a float; the JSON column's text keeps it exact."""
    big = 2**70 + 1
    assert json_text(f'{{"n": {{"int": {big}}}}}') == {"n": {"int": big}}
    assert json_text('{"n": {"int": 7}, "s": {"string": "a"}}') == {
        "n": {"int": 7},
        "s": {"string": "a"},
    }
    assert json_text(None) is None


@pytest.mark.django_db
def test_a_scrape_during_the_warm_up_reads_no_device(viewer_client) -> None:
    """While the web process warms up, /metrics serves what is known without waiting for the
    membership or reading a device: no class series, leaks once read, `warming` 1."""
    from claims.devices import counts

    load_demo(nodes=5, seed=1)
    counts._warming.set()
    try:
        with CaptureQueriesContext(connection) as queries:
            body = viewer_client.get("/metrics").content.decode()
        assert "dra_dashboard_warming 1.0" in body
        assert "dra_dashboard_class_units" not in body
        assert "dra_dashboard_leaks{" not in body
        assert not any("inventory_device" in query["sql"] for query in queries)
        find_leaks()
        assert "dra_dashboard_leaks{" in viewer_client.get("/metrics").content.decode()
    finally:
        counts._warming.clear()
    body = viewer_client.get("/metrics").content.decode()
    assert "dra_dashboard_warming 0.0" in body
    assert "dra_dashboard_class_units" in body
