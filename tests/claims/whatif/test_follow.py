"""The what-if state that follows the sync equals one built from scratch, change after change."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from claims.whatif.listing import list_cluster
from claims.whatif.options import parse_options
from claims.whatif.pods import parse_input
from claims.whatif.service import _live, answer_for, what_if
from claims.whatif.simulation import Simulation
from claims.whatif.state import build_view
from dralib.allocator import AllocatedState, SliceCache
from inventory.sync import apply_events, upsert_events
from tests.claims.whatif.helpers import claim_yaml

QUESTIONS = [
    claim_yaml(name="two-gpus", count=2),
    claim_yaml(name="one-nic", count=1, device_class="nic.example.com"),
    claim_yaml(name="one-fabric", count=1, device_class="fabric.example.com"),
    claim_yaml(name="two-mig", count=2, device_class="mig-1g.10gb"),
]


def _bump(obj: dict[str, Any], step: int) -> dict[str, Any]:
    """The object as the API server sends it after an edit: a new resourceVersion."""
    changed = copy.deepcopy(obj)
    changed["metadata"]["resourceVersion"] = str(10_000_000 + step)
    return changed


class Cluster:
    """The objects the test's API server would hold, changed at random and synced."""

    def __init__(self, demo: dict[str, list[dict[str, Any]]], seed: int) -> None:
        self.random = random.Random(seed)
        self.claims = {c["metadata"]["uid"]: c for c in demo["ResourceClaim"]}
        self.slices = {s["metadata"]["uid"]: s for s in demo["ResourceSlice"]}
        self.nodes = {n["metadata"]["uid"]: n for n in demo["Node"]}
        self.rules = {r["metadata"]["uid"]: r for r in demo["DeviceTaintRule"]}
        self.released: list[dict[str, Any]] = []
        self.step = 0

    def change(self) -> str:
        """One random change, written through the sync; returns what it was."""
        self.step += 1
        actions = [
            self.release_claim,
            self.release_claim,
            self.reallocate_claim,
            self.delete_claim,
            self.drop_device,
            self.taint_device,
            self.relabel_node,
            self.delete_slice,
            self.toggle_rule,
        ]
        return self.random.choice(actions)()

    def _pick(self, objects: dict[str, dict[str, Any]], test=lambda o: True) -> dict[str, Any]:
        return self.random.choice(sorted((o for o in objects.values() if test(o)), key=_uid))

    def release_claim(self) -> str:
        claim = self._pick(self.claims, lambda c: (c.get("status") or {}).get("allocation"))
        self.released.append(claim)
        changed = _bump(claim, self.step)
        changed["status"] = {}
        self._write("ResourceClaim", self.claims, changed)
        return f"released {_name(claim)}"

    def reallocate_claim(self) -> str:
        if not self.released:
            return self.release_claim()
        before = self.released.pop(self.random.randrange(len(self.released)))
        if _uid(before) not in self.claims:
            return self.release_claim()
        # The same devices again: nothing else took them (releases only free devices).
        self._write("ResourceClaim", self.claims, _bump(before, self.step))
        return f"allocated {_name(before)} again"

    def delete_claim(self) -> str:
        claim = self._pick(self.claims, lambda c: (c.get("status") or {}).get("allocation"))
        apply_events("ResourceClaim", [("DELETED", claim)], publish=False)
        del self.claims[_uid(claim)]
        return f"deleted claim {_name(claim)}"

    def drop_device(self) -> str:
        slice_ = self._pick(self.slices, lambda s: len(s["spec"].get("devices") or []) > 1)
        changed = _bump(slice_, self.step)
        devices = changed["spec"]["devices"]
        devices.pop(self.random.randrange(len(devices)))
        self._write("ResourceSlice", self.slices, changed)
        return f"slice {_name(slice_)} lost a device"

    def taint_device(self) -> str:
        slice_ = self._pick(self.slices, lambda s: bool(s["spec"].get("devices")))
        changed = _bump(slice_, self.step)
        device = self.random.choice(changed["spec"]["devices"])
        device["taints"] = [{"key": "test/broken", "value": "x", "effect": "NoSchedule"}]
        self._write("ResourceSlice", self.slices, changed)
        return f"tainted {_name(slice_)}/{device['name']}"

    def relabel_node(self) -> str:
        node = self._pick(self.nodes)
        changed = _bump(node, self.step)
        labels = changed["metadata"].setdefault("labels", {})
        zone = "topology.kubernetes.io/zone"
        labels[zone] = "zone-b" if labels.get(zone) == "zone-a" else "zone-a"
        self._write("Node", self.nodes, changed)
        return f"node {_name(node)} moved to {labels[zone]}"

    def delete_slice(self) -> str:
        slice_ = self._pick(self.slices)
        apply_events("ResourceSlice", [("DELETED", slice_)], publish=False)
        del self.slices[_uid(slice_)]
        return f"deleted slice {_name(slice_)}"

    def toggle_rule(self) -> str:
        if self.rules:
            rule = self._pick(self.rules)
            apply_events("DeviceTaintRule", [("DELETED", rule)], publish=False)
            del self.rules[_uid(rule)]
            self.removed_rule = rule
            return f"deleted DeviceTaintRule {_name(rule)}"
        rule = _bump(self.removed_rule, self.step)
        self._write("DeviceTaintRule", self.rules, rule)
        return f"created DeviceTaintRule {_name(rule)} again"

    def _write(self, kind: str, objects: dict[str, dict[str, Any]], obj: dict[str, Any]) -> None:
        result = upsert_events(kind, [(obj, None)], publish=False)
        assert not result.skipped, result.skipped
        objects[_uid(obj)] = obj


def _uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _rebuilt_answer(text: str) -> dict[str, Any]:
    """The answer of a simulation built from scratch on a fresh read, outside every cache."""
    options = parse_options(count=1, explain=True)
    parsed = parse_input(text, namespace=None, lookup=lambda *_: None, extended={})
    view = build_view(list_cluster(), SliceCache(), ())
    sim = Simulation(view, features=options.feature_set())
    return answer_for(parsed, options=options, view=view, quotas=[], simulation=sim)


def _comparable(answer: dict[str, Any]) -> Any:
    """The allocator's part of an answer, without share IDs (random UUIDs by design)."""
    keep = ("fits", "nodes", "placements", "summary", "headroom", "reasons", "best", "diagnosis")
    return _without_share_ids({key: answer[key] for key in keep})


def _without_share_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_share_ids(v) for k, v in value.items() if k != "shareID"}
    if isinstance(value, list):
        return [_without_share_ids(v) for v in value]
    return value


def _assert_state_equal(sim: Simulation) -> None:
    rebuilt = AllocatedState()
    rebuilt.add_allocated_claims(
        list_cluster().allocated_claims,
        consumable_capacity=sim.features.ConsumableCapacity,
    )
    followed = sim._base_state
    assert followed.allocated_devices == rebuilt.allocated_devices
    assert followed.allocated_shared_device_ids == rebuilt.allocated_shared_device_ids
    assert followed.aggregated_capacity == rebuilt.aggregated_capacity


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2])
def test_followed_state_equals_rebuilt_state(demo, seed) -> None:
    """After each random synced change the followed answers equal answers built from scratch."""
    cluster = Cluster(demo, seed)
    for text in QUESTIONS:
        what_if(text, use_cache=False)
    (live,) = _live.values()
    followed_steps = 0
    for _ in range(30):
        what = cluster.change()
        for text in QUESTIONS:
            answer = what_if(text, use_cache=False)
            assert _comparable(answer) == _comparable(_rebuilt_answer(text)), what
        (now,) = _live.values()
        followed_steps += now is live
        live = now
        _assert_state_equal(live)
    # Most changes were followed, not rebuilt (only class changes rebuild).
    assert followed_steps == 30


@pytest.mark.django_db
def test_a_change_asks_again_only_about_touched_nodes(demo) -> None:
    """Releasing one claim re-evaluates the nodes that see its pool, not the whole cluster."""
    text = QUESTIONS[0]
    what_if(text, use_cache=False)
    (live,) = _live.values()
    claim = next(
        c
        for c in demo["ResourceClaim"]
        if any(
            r["pool"].startswith("node-")
            for r in ((c.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        )
    )
    node = claim["status"]["allocation"]["devices"]["results"][0]["pool"]
    changed = _bump(claim, 1)
    changed["status"] = {}
    upsert_events("ResourceClaim", [(changed, None)], publish=False)
    asked: list[str] = []
    original = live.verdict

    def spy(node_obj, *args, **kwargs):
        asked.append(node_obj["metadata"]["name"])
        return original(node_obj, *args, **kwargs)

    live.verdict = spy  # type: ignore[method-assign]
    answer = what_if(text, use_cache=False)
    assert answer["summary"]["nodesChecked"] == len(demo["Node"])
    # The released claim's node is asked again; besides it only the node headroom places the
    # copy on (asked again for stranded devices) may be.
    assert node in asked
    assert set(asked) <= {node, answer["summary"]["firstNode"]}


@pytest.mark.django_db
def test_few_followed_simulations_are_kept(demo) -> None:
    """Each set of features has its own followed simulation; only the most recent few stay."""
    text = QUESTIONS[0]
    for features in ({}, {"DeviceTaints": False}, {"ConsumableCapacity": False}):
        what_if(text, use_cache=False, features=features)
    kept = [json.loads(key) for key in _live]
    assert len(kept) == 2
    # The default set went first; the two most recent remain, the newest last.
    assert kept[0].get("DeviceTaints") is False
    assert kept[1].get("ConsumableCapacity") is False


def _pod_yaml(cpu: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: cpu-hungry, namespace: default}}
spec:
  containers:
  - name: main
    image: registry.example/main:1
    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def _filters(answer: dict[str, Any]) -> dict[str, Any]:
    return {entry["node"]: entry.get("filter") for entry in answer["nodes"]}


@pytest.mark.django_db
def test_kept_node_checks_follow_nodes_and_pods(demo, monkeypatch) -> None:
    """A pod's other filters are kept per node: a claim change checks no node again, a pod
    bound to a node checks every node again, and the answers equal ones made from scratch."""
    from claims.whatif import answer, service

    checked: list[str] = []
    original = answer.check_all

    def counting(filters, node):
        checked.append(node["metadata"]["name"])
        return original(filters, node)

    monkeypatch.setattr(answer, "check_all", counting)
    nodes = len(demo["Node"])
    text = _pod_yaml("500m")
    first = what_if(text, use_cache=False, nodes_limit="all")
    assert len(checked) == nodes
    what_if(text, use_cache=False, nodes_limit="all")
    assert len(checked) == nodes  # nothing changed: no node checked again

    claim = next(c for c in demo["ResourceClaim"] if (c.get("status") or {}).get("allocation"))
    released = _bump(claim, 1)
    released["status"] = {}
    upsert_events("ResourceClaim", [(released, None)], publish=False)
    assert _filters(what_if(text, use_cache=False, nodes_limit="all")) == _filters(first)
    assert len(checked) == nodes  # a claim changes no node's room for the pod

    # A pod bound to the first node takes all the cpu it has: that node no longer fits.
    node = min(demo["Node"], key=_name)
    from claims.whatif.nodefit import node_allocatable

    cpu_millis = (node_allocatable(node) or {})["cpu"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler", "namespace": "default", "uid": "filler-uid"},
        "spec": {
            "nodeName": _name(node),
            "containers": [{"name": "main", "resources": {"requests": {"cpu": f"{cpu_millis}m"}}}],
        },
        "status": {"phase": "Running"},
    }
    pod["metadata"]["resourceVersion"] = "20000000"
    upsert_events("Pod", [(pod, None)], publish=False)
    after = what_if(text, use_cache=False, nodes_limit="all")
    assert len(checked) == 2 * nodes  # pods changed: every node checked again
    assert after["nodes"][0]["node"] == _name(node)
    assert (after["nodes"][0].get("filter") or {}).get("filter") == "NodeResourcesFit"
    service.forget_simulations()
    assert _filters(what_if(text, use_cache=False, nodes_limit="all")) == _filters(after)
