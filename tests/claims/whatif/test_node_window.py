"""Answers hold a window of nodes (nodesOffset, nodesLimit), so their size does not grow with
the cluster; counts, groups and the first pick stay over every node."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from claims.whatif import simulation
from claims.whatif.nodefilter import fit_error
from claims.whatif.options import MAX_NODES_LIMIT, MAX_NODES_OFFSET, NODES_LIMIT_DEFAULT
from claims.whatif.service import what_if
from claims.whatif.simulation import NOT_EVALUATED
from dashboard.renderers import FastJSONRenderer
from dralib.allocator import budget
from tests import clock
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.helpers import URL, claim_yaml
from tests.claims.whatif.test_budget import exponential_claim, hostile_cluster
from tests.claims.whatif.test_preemption import PICK_TABLE, asking, cluster, running
from tests.claims.whatif.test_preemption import ask as preempting

# 100 copies of a demo node: with the demo's 20, more nodes than one default window.
CLONES = [{"op": "add-nodes", "like": "node-0001", "count": 100}]


def ask(api: Any, body: dict[str, Any], path: str = URL) -> dict[str, Any]:
    response = api.post(path, {"yaml": claim_yaml(), **body}, format="json")
    assert response.status_code == 200, response.content[:300]
    return response.json()


def test_the_api_answers_the_first_100_nodes_by_default(demo, api) -> None:
    """Without nodesLimit the API answers 100 nodes' verdicts; counts are over all 120."""
    answer = ask(api, {"assume": CLONES})
    whole = ask(api, {"assume": CLONES, "nodesLimit": "all"})
    assert len(whole["nodes"]) == 120
    assert answer["nodes"] == whole["nodes"][:NODES_LIMIT_DEFAULT]
    assert answer["nodesPage"] == {
        "offset": 0,
        "limit": NODES_LIMIT_DEFAULT,
        "total": 120,
        "returned": NODES_LIMIT_DEFAULT,
        "next": NODES_LIMIT_DEFAULT,
    }
    assert answer["summary"] == whole["summary"]
    assert answer["summary"]["nodesChecked"] == 120
    assert answer["nodeGroups"] == whole["nodeGroups"]
    assert (
        sum(g["nodes"] for g in answer["nodeGroups"] if g["fits"])
        == (answer["summary"]["nodesFitSchedulable"])
    )
    assert answer["headroom"]["placementsTotal"] == whole["headroom"]["placementsTotal"]


def test_paging_walks_every_node_exactly_once(demo, api) -> None:
    """Pages of 6 (offset by `next`) hold every node, placement and copy of the whole answer
    once, in name order, with the same summary and groups on every page."""
    body = {"count": 40}
    whole = ask(api, {**body, "nodesLimit": 0})
    assert whole["nodesPage"]["limit"] is None and whole["nodesPage"]["next"] is None
    nodes: list[dict[str, Any]] = []
    placements: list[dict[str, Any]] = []
    copies: list[dict[str, Any]] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = ask(api, {**body, "nodesOffset": offset, "nodesLimit": 6})
        assert page["nodesPage"]["offset"] == offset
        assert page["nodesPage"]["returned"] == len(page["nodes"]) <= 6
        assert page["summary"] == whole["summary"]
        assert page["nodeGroups"] == whole["nodeGroups"]
        assert page["firstPlacement"] == whole["firstPlacement"]
        nodes += page["nodes"]
        placements += page["placements"]
        copies += page["headroom"]["placements"]
        offset = page["nodesPage"]["next"]
        pages += 1
    assert pages == 4  # 20 nodes
    assert nodes == whole["nodes"]
    assert [n["node"] for n in nodes] == sorted(n["node"] for n in nodes)
    assert placements == whole["placements"]
    assert sorted(copies, key=lambda p: p["node"]) == sorted(
        whole["headroom"]["placements"], key=lambda p: p["node"]
    )
    assert sum(p["copies"] for p in copies) == whole["headroom"]["placed"]


def test_past_the_last_node_is_an_empty_page(demo, api) -> None:
    """An offset beyond the nodes answers none of them, counts intact, no next page."""
    answer = ask(api, {"nodesOffset": 500, "nodesLimit": 10})
    assert answer["nodes"] == [] and answer["placements"] == []
    assert answer["nodesPage"]["returned"] == 0 and answer["nodesPage"]["next"] is None
    assert answer["summary"]["nodesChecked"] == 20


def test_the_first_pick_and_a_gang_do_not_depend_on_the_window(demo, api) -> None:
    """A window past the first fitting node still names it, with its devices, for the pods."""
    first = ask(api, {"nodesLimit": 1})
    later = ask(api, {"nodesOffset": 19, "nodesLimit": 1})
    node = first["summary"]["firstNode"]
    assert node and later["firstPlacement"]["node"] == node
    assert later["firstPlacement"] == first["firstPlacement"]
    assert node not in {n["node"] for n in later["nodes"]}
    assert later["pods"] == first["pods"]
    assert later["pods"][0]["node"] == node


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"nodesLimit": -1}, "nodesLimit"),
        ({"nodesLimit": MAX_NODES_LIMIT + 1}, "nodesLimit"),
        ({"nodesLimit": "some"}, "nodesLimit"),
        ({"nodesLimit": True}, "nodesLimit"),
        ({"nodesLimit": 2.5}, "nodesLimit"),
        ({"nodesLimit": [5]}, "nodesLimit"),
        ({"nodesOffset": -1}, "nodesOffset"),
        ({"nodesOffset": MAX_NODES_OFFSET + 1}, "nodesOffset"),
        ({"nodesOffset": "ten"}, "nodesOffset"),
        ({"nodesOffset": {"a": 1}}, "nodesOffset"),
    ],
)
def test_bad_window_values_are_a_400_naming_the_field(demo, api, body, field) -> None:
    """A bad offset or limit is refused by the answer and the jobs endpoint alike."""
    for path in (URL, URL + "jobs/"):
        response = api.post(path, {"yaml": claim_yaml(), **body}, format="json")
        assert response.status_code == 400, (path, response.content[:300])
        assert response.json()["field"] == field


def test_window_options_in_the_query_string(demo, api) -> None:
    """A raw YAML body takes the window from the query string, as every other option."""
    response = api.generic(
        "POST", URL + "?nodesOffset=2&nodesLimit=3", claim_yaml(), content_type="application/yaml"
    )
    assert response.status_code == 200, response.content[:300]
    assert [n["node"] for n in response.json()["nodes"]] == ["node-0003", "node-0004", "node-0005"]


def test_each_window_is_its_own_cached_answer(demo) -> None:
    """The cache key holds the window: another window is computed, the same one is cached."""
    text = claim_yaml()
    first = what_if(text, nodes_limit=5)
    other = what_if(text, nodes_offset=5, nodes_limit=5)
    again = what_if(text, nodes_limit=5)
    assert (first["cached"], other["cached"], again["cached"]) == (False, False, True)
    assert [n["node"] for n in other["nodes"]] == [f"node-{i:04d}" for i in range(6, 11)]
    assert again["nodes"] == first["nodes"]
    # Python callers get every node unless they ask for a window.
    assert len(what_if(text)["nodes"]) == 20


def test_a_job_result_carries_the_window(demo, api) -> None:
    """A job answers the window it was asked (and 100 nodes when not told)."""
    asked = api.post(URL + "jobs/", {"yaml": claim_yaml(), "nodesLimit": 4}, format="json")
    assert asked.status_code == 202, asked.content[:300]
    job = api.get(f"{URL}jobs/{asked.json()['id']}/").json()
    assert job["status"] == "done", job
    assert len(job["result"]["nodes"]) == 4
    assert job["result"]["nodesPage"]["next"] == 4
    default = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json").json()
    result = api.get(f"{URL}jobs/{default['id']}/").json()["result"]
    assert result["nodesPage"]["limit"] == NODES_LIMIT_DEFAULT
    assert len(result["nodes"]) == 20


def test_groups_count_every_node_by_reason(small, api) -> None:
    """Each node is in the fitting group or under each reason that removes it."""
    answer = ask(api, {"nodesLimit": 1})
    whole = ask(api, {"nodesLimit": "all"})
    per_node: dict[str, int] = {}
    for entry in whole["nodes"]:
        per_node[entry["node"]] = len((entry.get("filter") or {}).get("reasons") or [1])
    assert sum(g["nodes"] for g in answer["nodeGroups"]) == sum(per_node.values())
    fitting = [g for g in answer["nodeGroups"] if g["fits"]]
    assert [g["nodes"] for g in fitting] == [answer["summary"]["nodesFitSchedulable"]] * bool(
        fitting
    )
    for group in answer["nodeGroups"]:
        assert set(group["firstNodes"]) <= set(per_node) and len(group["firstNodes"]) <= 3


def _same_nodes(start: int, stop: int) -> list[dict[str, Any]]:
    """Nodes alike but for their names (every tenth one tainted), two GPUs each."""
    out: list[dict[str, Any]] = []
    for index in range(start, stop):
        name = f"n-{index:05d}"
        taints = [{"key": "dedicated", "effect": "NoSchedule"}] if index % 10 == 9 else []
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"zone": "a"}},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus", "uid": f"uid-slice-{name}"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{i}"} for i in range(2)],
                },
            }
        )
    return out


def _answer_bytes(api: Any) -> tuple[int, dict[str, Any]]:
    answer = ask(api, {"count": 50})
    assert len(answer["nodes"]) == NODES_LIMIT_DEFAULT
    for volatile in ("elapsedSeconds", "cached", "fingerprint", "cluster"):
        answer.pop(volatile)
    return len(json.dumps(answer, separators=(",", ":"))), answer


def test_answer_size_does_not_grow_with_the_cluster(db, api) -> None:
    """The default answer about 2,000 nodes is within a few hundred bytes of the one about
    200: counts gain a digit, no list grows."""
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com", "uid": "uid-class-gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    load_objects([device_class, *_same_nodes(0, 200)])
    small_size, small = _answer_bytes(api)
    load_objects(_same_nodes(200, 2_000))
    large_size, large = _answer_bytes(api)
    assert (small["summary"]["nodesChecked"], large["summary"]["nodesChecked"]) == (200, 2_000)
    assert large["nodesPage"]["total"] == 2_000 and large["headroom"]["placed"] == 50
    sizes = {k: (len(json.dumps(small[k])), len(json.dumps(large[k]))) for k in small}
    assert abs(large_size - small_size) < 512, sizes


def test_preemption_weighs_every_node_whatever_the_window(db) -> None:
    """Upstream's "machine with min highest priority pod" case asked with a window of the first
    node only: preemption still picks machine3, outside the window."""
    _, nodes, wanted, pods, expected = PICK_TABLE[2]
    assert expected == "machine3"
    cluster(nodes, [running(n, f"machine{m}", u, p) for n, m, u, p in pods])
    windowed = preempting(asking(*wanted), nodes_limit=1)
    whole = preempting(asking(*wanted))
    assert [n["node"] for n in windowed["nodes"]] == ["machine1"]
    assert windowed["preemption"]["node"] == expected
    assert windowed["preemption"] == whole["preemption"]


def test_groups_count_reasons_as_the_schedulers_message(small, api) -> None:
    """When no node takes the pod, the groups' counts are the scheduler's FitError counts."""
    answer = ask(api, {"nodesLimit": 1})
    blocked = api.post(URL, {"yaml": claim_yaml(count=3), "nodesLimit": 1}, format="json").json()
    assert blocked["fits"] is False and not any(g["fits"] for g in blocked["nodeGroups"])
    counts = Counter({g["reason"]: g["nodes"] for g in blocked["nodeGroups"]})
    assert blocked["reasons"][0] == fit_error(4, counts)
    assert {g["filter"] for g in blocked["nodeGroups"]} >= {"TaintToleration", "DynamicResources"}
    assert answer["nodeGroups"][0]["fits"] is True


def test_a_partial_answer_counts_every_node_not_the_window(db, monkeypatch, api) -> None:
    """gaveUp's "k of N nodes evaluated" and the groups count all nodes, whatever the window;
    the API's answer is JSON, rendered by orjson."""
    load_objects(hostile_cluster())
    clock.install(monkeypatch, budget, simulation, tick=0.1)
    answer = what_if(exponential_claim(), budget=1, use_cache=False, nodes_limit=1)
    skipped = answer["summary"]["nodesNotEvaluated"]
    assert len(answer["nodes"]) == 1 and 0 < skipped <= 3
    assert answer["gaveUp"]["message"].endswith(f"{3 - skipped} of 3 nodes evaluated")
    assert {"reason": NOT_EVALUATED, "nodes": skipped} in [
        {"reason": g["reason"], "nodes": g["nodes"]} for g in answer["nodeGroups"]
    ]
    response = api.post(
        URL, {"yaml": claim_yaml(device_class="gpu"), "nodesLimit": 2}, format="json"
    )
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert len(response.json()["nodes"]) == 2
    assert isinstance(response.accepted_renderer, FastJSONRenderer)
