"""Every list endpoint reads in a constant number of queries, whatever the number of rows."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.choices import Kind
from inventory.models import SkippedObject, SyncState
from tests import factories as f
from tests.api.endpoints import ALL_ENDPOINTS

_worlds = itertools.count()
_KINDS = list(Kind)


def add_worlds(count: int) -> None:
    """Add `count` small worlds: every kind of object, with allocations, counters and taints."""
    for _ in range(count):
        i = next(_worlds)
        driver = f"gpu{i}.example.com"
        node = f"node-{i}"
        devices = [
            f.device_entry(
                f"dev-{d}",
                attributes={"model": {"string": "h100"}},
                capacity={"memory": "80Gi"},
                consumes={"counters": {"memory": "40Gi"}},
                taints=[{"key": "k", "effect": "NoSchedule"}] if d == 2 else (),
            )
            for d in range(3)
        ]
        f.create(
            f.node_object(node),
            f.device_class_object(f"class-{i}", expression=f'device.driver == "{driver}"'),
            f.slice_object(
                f"slice-{i}",
                driver=driver,
                pool=node,
                node=node,
                devices=devices,
                counters={"counters": {"memory": "80Gi"}},
            ),
            f.taint_rule_object(f"rule-{i}", driver=driver, device="dev-1"),
            f.claim_object(
                f"claim-{i}",
                namespace=f"ns-{i}",
                device_class=f"class-{i}",
                results=[f.allocation_result("req", driver=driver, pool=node, device="dev-0")],
                node=node,
                reserved_for=[f"pod-{i}"],
            ),
            f.template_object(f"template-{i}", namespace=f"ns-{i}"),
            f.pod_object(f"pod-{i}", namespace=f"ns-{i}", claim=f"claim-{i}", node=node),
            f.quota_object(f"quota-{i}", namespace=f"ns-{i}", hard={"count/pods": "4"}),
            f.resource_class_object(f"classic-{i}", driver=driver),
            f.scheduling_context_object(f"pod-{i}", namespace=f"ns-{i}", node=node),
        )
        SyncState.objects.create(kind=_KINDS[i % len(_KINDS)])
        SkippedObject.objects.create(kind=Kind.POD, name=f"bad-{i}", error="bad")


def _count(client, url: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, {"limit": 1000})
    assert response.status_code == 200, response.content
    body = response.json()
    items = body["results"] if "results" in body else body["classes"]
    return len(queries), len(items)


def _count_yaml(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, {"format": "yaml", "limit": 1000}).status_code == 200
    return len(queries)


URLS = [e.url for e in ALL_ENDPOINTS] + [
    "/api/inventory/utilisation/pools/",
    "/api/inventory/utilisation/classes/",
    "/api/inventory/availability/",
    "/api/inventory/devices/?attribute=model=h100&state=tainted",
    "/api/claims/resource-claims/?class=class-1&driver=gpu1.example.com",
]


@pytest.mark.parametrize("url", URLS)
def test_list_query_count_is_constant(api, url: str) -> None:
    """N worlds and 3N worlds are listed with the same number of queries."""
    add_worlds(2)
    queries_small, items_small = _count(api, url)
    yaml_small = _count_yaml(api, url)
    add_worlds(4)
    queries_large, items_large = _count(api, url)
    assert queries_large == queries_small
    if "class=" not in url:
        assert items_small > 0
        assert items_large == 3 * items_small
    # Also as YAML, which reads the raw objects: constant too (the device list refines its
    # states only in JSON, so the two formats need not count the same).
    assert _count_yaml(api, url) == yaml_small
