"""What the bound, unfinished pods of each node request (`listing.node_usage`): their sums and
host ports, the few pods with extended resources or host ports read in one scan."""

from __future__ import annotations

from typing import Any

import pytest

from claims.whatif.listing import node_usage
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.test_node_resources import node, pod


def _with(obj: dict[str, Any], **requests: str) -> dict[str, Any]:
    obj["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {}).update(
        requests
    )
    return obj


@pytest.mark.django_db
def test_extended_resources_and_host_ports_are_summed_per_node(
    django_assert_num_queries,
) -> None:
    """Pods with an extended resource, a host port or both, on two nodes, beside ordinary and
    finished ones: each node's sums and ports are theirs, in two queries."""
    objects = [
        node("a"),
        node("b"),
        pod("plain", node_name="a", cpu="1"),
        _with(pod("fpga", node_name="a", cpu="1"), **{"example.com/fpga": "2"}),
        _with(pod("both", node_name="a", host_port=8080), **{"example.com/fpga": "1"}),
        pod("web", node_name="b", host_port=9090),
        pod("web2", node_name="b", host_port=9091),
        _with(pod("done", node_name="b", phase="Succeeded"), **{"example.com/fpga": "5"}),
        pod("unbound", cpu="2", host_port=7070),
    ]
    load_objects(objects)
    with django_assert_num_queries(2):
        usage = node_usage()
    assert set(usage) == {"a", "b"}
    assert usage["a"].pods == 3
    assert usage["a"].requested["example.com/fpga"] == 3
    assert usage["a"].requested["cpu"] == 2000
    assert [port for _, _, port in usage["a"].ports] == [8080]
    assert usage["b"].pods == 2
    assert "example.com/fpga" not in usage["b"].requested
    assert sorted(port for _, _, port in usage["b"].ports) == [9090, 9091]
