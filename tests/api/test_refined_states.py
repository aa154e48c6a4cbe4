"""The device list API and `?state=` know blocked and unhealthy, in a constant number of queries."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from claims.choices import DeviceState
from claims.devices.states import annotate_device_state, refine_device_states
from inventory.models import Device
from tests import factories as f
from tests.api.conftest import GPU, not_ready_claim, results

DEVICES = "/api/inventory/devices/"
_worlds = itertools.count()


def _listed(api, query: str) -> dict[str, dict]:
    body = results(api.get(f"{DEVICES}?{query}&limit=1000"))
    return {f"{item['pool_name']}/{item['name']}": item for item in body}


def _refined_all() -> list[Device]:
    devices = list(annotate_device_state(Device.objects.all()))
    refine_device_states(devices)
    return devices


def _no_execute_on_gpu_1() -> None:
    f.create(
        f.taint_rule_object("ecc", driver=GPU, pool="node-b", device="gpu-1", effect="NoExecute")
    )


def test_device_list_carries_effective_state_blocked_and_unhealthy(api, cluster) -> None:
    """Every listed device has the same refined fields as `refine_device_states` gives it."""
    _no_execute_on_gpu_1()
    listed = _listed(api, "current=true")
    expected = {f"{d.pool_name}/{d.name}": d for d in _refined_all() if d.current}
    assert listed.keys() == expected.keys()
    for key, item in listed.items():
        device = expected[key]
        assert (item["effective_state"], item["blocked"], item["unhealthy"]) == (
            device.effective_state,
            device.blocked,
            device.unhealthy,
        ), key
    assert listed["node-a-mig/mig-7g"]["effective_state"] == DeviceState.BLOCKED
    assert listed["node-a-mig/mig-7g"]["state"] == DeviceState.FREE
    assert listed["node-b/gpu-1"]["effective_state"] == DeviceState.UNHEALTHY


def test_state_filter_blocked_matches_the_refined_flag(api, cluster) -> None:
    """`?state=blocked` lists the blocked devices; blocked stays a part of `state=free`."""
    blocked = {f"{d.pool_name}/{d.name}" for d in _refined_all() if d.blocked}
    assert blocked == {"node-a-mig/mig-7g"}
    assert _listed(api, "state=blocked").keys() == blocked
    assert blocked <= _listed(api, "state=free").keys()
    both = _listed(api, "state=blocked&state=allocated")
    assert blocked < both.keys()
    assert {item["state"] for key, item in both.items() if key not in blocked} == {"allocated"}


def test_state_filter_unhealthy_by_taint_rule_and_ready_false(api, cluster) -> None:
    """`?state=unhealthy` finds NoExecute rules and Ready=False device conditions."""
    assert _listed(api, "state=unhealthy") == {}
    _no_execute_on_gpu_1()
    f.create(not_ready_claim("broken", pool="node-a", device="gpu-4"))
    unhealthy = {f"{d.pool_name}/{d.name}" for d in _refined_all() if d.unhealthy}
    assert unhealthy == {"node-b/gpu-1", "node-a/gpu-4"}
    assert _listed(api, "state=unhealthy").keys() == unhealthy
    narrowed = _listed(api, "state=unhealthy&pool=node-a")
    assert narrowed.keys() == {"node-a/gpu-4"}


def test_state_filter_refuses_unknown_states(api, db) -> None:
    """A state outside DeviceState is a 400 naming the parameter."""
    response = api.get(f"{DEVICES}?state=broken")
    assert response.status_code == 400
    assert "state" in response.json()


def add_worlds(count: int) -> None:
    """Pools with one blocked partition and one device under a NoExecute rule, per world."""
    for _ in range(count):
        i = next(_worlds)
        driver, node = f"mig{i}.example.com", f"node-{i}"
        consumes = {"gpu-0-counters": {"memory": "10Gi"}}
        f.create(
            f.slice_object(
                f"slice-{i}",
                driver=driver,
                pool=node,
                node=node,
                devices=[
                    f.device_entry("small-0", consumes=consumes),
                    f.device_entry("large", consumes={"gpu-0-counters": {"memory": "20Gi"}}),
                    f.device_entry("other"),
                ],
                counters={"gpu-0-counters": {"memory": "20Gi"}},
            ),
            f.taint_rule_object(f"rule-{i}", driver=driver, device="other", effect="NoExecute"),
            f.claim_object(
                f"claim-{i}",
                namespace=f"ns-{i}",
                results=[f.allocation_result("req", driver=driver, pool=node, device="small-0")],
            ),
        )


def _count(api, query: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        items = results(api.get(f"{DEVICES}?{query}&limit=1000"))
    return len(queries), len(items)


@pytest.mark.parametrize(
    "query", ["state=blocked", "state=unhealthy", "state=free", "current=true"]
)
def test_refined_list_and_filters_query_count_is_constant(api, db, query: str) -> None:
    """N worlds and 3N worlds are listed and filtered with the same number of queries."""
    add_worlds(2)
    queries_small, items_small = _count(api, query)
    add_worlds(4)
    queries_large, items_large = _count(api, query)
    assert queries_large == queries_small
    assert items_small > 0
    assert items_large == 3 * items_small
