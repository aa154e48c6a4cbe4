"""Equivalence classes of nodes change nothing in an answer, and ask the allocator per class.

Random clusters of a few node shapes (whole GPUs with unique UUIDs, partitionable GPUs sharing
counters, NICs with consumable capacity, tainted devices, now and then an invalid or incomplete
pool, a shared network pool for all nodes and one for labelled nodes) with random allocations,
asked random claims: the answer with classes on equals the answer with every node asked on its
own.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from claims.whatif import equivalence
from claims.whatif.engine import evaluate
from claims.whatif.follow import view_change
from claims.whatif.inputs import InputClaim, WhatIfError
from claims.whatif.options import Options
from claims.whatif.service import forget_simulations, what_if
from claims.whatif.simulation import Simulation
from claims.whatif.state import ClusterView
from dralib.allocator import Features, SliceCache
from tests.claims.whatif.helpers import claim_yaml

GPU = "gpu.example.com"
NIC = "nic.example.com"
FABRIC = "fabric.example.com"
JSON = dict[str, Any]


def _class(name: str, expression: str) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


CLASSES = [
    _class("gpu", f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "gpu"'),
    _class("mig", f'device.attributes["{GPU}"].type == "mig"'),
    _class("nic", f'device.driver == "{NIC}"'),
    _class("fabric", f'device.driver == "{FABRIC}"'),
    # Reads the capacity: no projection, so whole device content counts.
    _class("big-gpu", f'device.capacity["{GPU}"].memory.compareTo(quantity("60Gi")) >= 0'),
]


def _slice(name: str, driver: str, pool: str, *, node: str | None, **spec: Any) -> JSON:
    body: JSON = {
        "driver": driver,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": spec.pop("count", 1)},
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body,
    }


def _gpu(index: int, rng: random.Random, *, model: str, memory: str) -> JSON:
    device: JSON = {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "model": {"string": model},
            "numa": {"int": index % 2},
            "uuid": {"string": f"GPU-{uuid.UUID(int=rng.getrandbits(128))}"},
        },
        "capacity": {"memory": {"value": memory}},
    }
    if rng.random() < 0.1:
        device["taints"] = [{"key": "broken", "value": "ecc", "effect": "NoSchedule"}]
    return device


def _node_objects(name: str, shape: int, rng: random.Random) -> tuple[JSON, list[JSON]]:
    labels = {"kubernetes.io/hostname": name, "rack": rng.choice(["a", "b"])}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    slices = []
    model, memory = [("a100", "40Gi"), ("h100", "80Gi")][shape % 2]
    if shape < 2:
        devices = [_gpu(i, rng, model=model, memory=memory) for i in range(4)]
        if rng.random() < 0.1:
            devices[3]["name"] = "gpu-0"  # an invalid pool: duplicate device names
        slices.append(_slice(f"{name}-gpus", GPU, name, node=name, devices=devices))
    else:
        counters = [{"name": f"gpu-{i}", "counters": {"memory": {"value": "80Gi"}}} for i in (0, 1)]
        devices = []
        for i in (0, 1):
            whole = _gpu(i, rng, model="h100", memory="80Gi")
            whole["consumesCounters"] = [
                {"counterSet": f"gpu-{i}", "counters": {"memory": {"value": "80Gi"}}}
            ]
            devices.append(whole)
            for part in range(3):
                devices.append(
                    {
                        "name": f"gpu-{i}-mig-{part}",
                        "attributes": {"type": {"string": "mig"}, "parent": {"int": i}},
                        "capacity": {"memory": {"value": "20Gi"}},
                        "consumesCounters": [
                            {"counterSet": f"gpu-{i}", "counters": {"memory": {"value": "20Gi"}}}
                        ],
                    }
                )
        # Now and then a slice is missing: an incomplete pool.
        count = 3 if rng.random() < 0.1 else 2
        slices.append(
            _slice(f"{name}-counters", GPU, name, node=name, count=count, sharedCounters=counters)
        )
        slices.append(_slice(f"{name}-parts", GPU, name, node=name, count=count, devices=devices))
    nics = [
        {
            "name": f"nic-{i}",
            "attributes": {"mac": {"string": f"02:00:{rng.getrandbits(16):04x}"}},
            "capacity": {
                "bandwidth": {
                    "value": "100G",
                    "requestPolicy": {"default": "10G", "validRange": {"min": "1G", "step": "1G"}},
                }
            },
            "allowMultipleAllocations": True,
        }
        for i in range(2)
    ]
    # The NIC driver names its pool after the node too: two pools of one name on the node.
    slices.append(_slice(f"{name}-nics", NIC, name, node=name, devices=nics))
    return node, slices


def _shared_slices() -> list[JSON]:
    links = [{"name": f"link-{i}", "attributes": {"speed": {"int": 400}}} for i in range(3)]
    rack = [{"name": f"switch-{i}", "attributes": {"speed": {"int": 800}}} for i in range(2)]
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    return [
        _slice("fabric-all", FABRIC, "fabric", node=None, allNodes=True, devices=links),
        _slice("fabric-rack-a", FABRIC, "rack-a", node=None, nodeSelector=selector, devices=rack),
    ]


def _allocated(slices: list[JSON], rng: random.Random) -> list[JSON]:
    """Claims holding random devices: whole devices, NIC shares with bandwidth, admin access."""
    claims = []
    for index, item in enumerate(slices):
        spec = item["spec"]
        for device in spec.get("devices") or []:
            if rng.random() > 0.25:
                continue
            result: JSON = {
                "request": "r",
                "driver": spec["driver"],
                "pool": spec["pool"]["name"],
                "device": device["name"],
            }
            if device.get("allowMultipleAllocations"):
                result["shareID"] = f"share-{index}-{device['name']}"
                result["consumedCapacity"] = {"bandwidth": rng.choice(["10G", "50G"])}
            elif rng.random() < 0.1:
                result["adminAccess"] = True
            claims.append(
                {
                    "metadata": {"name": f"held-{len(claims)}", "namespace": "team-b"},
                    "status": {"allocation": {"devices": {"results": [result]}}},
                }
            )
    return claims


def random_view(rng: random.Random, *, nodes: int) -> ClusterView:
    node_objects, slices = [], _shared_slices()
    for index in range(nodes):
        node, own = _node_objects(f"node-{index:02d}", rng.randrange(3), rng)
        node_objects.append(node)
        slices.extend(own)
    return ClusterView(
        nodes=node_objects,
        classes=CLASSES,
        slices=slices,
        allocated_claims=_allocated(slices, rng),
        fingerprint="random",
        slice_cache=SliceCache(),
    )


def _request(rng: random.Random, index: int) -> JSON:
    device_class = rng.choice(["gpu", "gpu", "mig", "nic", "fabric", "big-gpu"])
    exactly: JSON = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": rng.choice([1, 1, 2, 3]),
    }
    if device_class == "gpu" and rng.random() < 0.4:
        model = rng.choice(["a100", "h100"])
        exactly["selectors"] = [
            {"cel": {"expression": f'device.attributes["{GPU}"].model == "{model}"'}}
        ]
    if device_class == "nic":
        exactly["capacity"] = {"requests": {"bandwidth": rng.choice(["10G", "60G"])}}
    if rng.random() < 0.15:
        exactly["tolerations"] = [{"key": "broken", "operator": "Exists"}]
    if rng.random() < 0.1:
        exactly["adminAccess"] = True
    if rng.random() < 0.1:
        exactly["allocationMode"] = "All"
        del exactly["count"]
    if rng.random() < 0.15:
        return {
            "name": f"r{index}",
            "firstAvailable": [
                {**exactly, "name": "first", "count": 4, "allocationMode": "ExactCount"},
                {**exactly, "name": "second"},
            ],
        }
    return {"name": f"r{index}", "exactly": exactly}


def random_claims(rng: random.Random) -> list[InputClaim]:
    claims = []
    for c_index in range(rng.choice([1, 1, 2])):
        requests = [_request(rng, r_index) for r_index in range(rng.choice([1, 1, 2]))]
        devices: JSON = {"requests": requests}
        if rng.random() < 0.3:
            devices["constraints"] = [{"matchAttribute": f"{GPU}/numa"}]
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"ask-{c_index}", "namespace": "team-a"},
            "spec": {"devices": devices},
        }
        claims.append(InputClaim(obj=obj, source=f"claims[{c_index}]"))
    return claims


def _without_share_ids(value: Any) -> Any:
    # Share IDs are random UUIDs, as upstream's are: two runs never agree on them.
    if isinstance(value, dict):
        return {k: "*" if k == "shareID" else _without_share_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_share_ids(v) for v in value]
    return value


def _answer(sim: Simulation, claims: list[InputClaim], *, count: int, explain: bool) -> Any:
    try:
        answer = evaluate(
            sim,
            claims,
            options=Options(count=count, explain=explain),
            node_check=lambda node: ("", ""),
        )
    except WhatIfError as exc:
        # An error of the input (a constraint an All request cannot meet): the same either way.
        return {"error": [exc.field, exc.message]}
    return _without_share_ids(answer)


@pytest.mark.parametrize("seed", range(50))
def test_classes_change_no_answer(seed: int) -> None:
    """Three questions in turn (one count=max) on one random cluster: classes on equals off."""
    rng = random.Random(seed)
    view = random_view(rng, nodes=rng.choice([4, 8, 12]))
    with_classes = Simulation(view, features=Features(), classes=True)
    alone = Simulation(view, features=Features(), classes=False)
    asked = 0
    for count in (1, rng.choice([3, 7]), 1000):
        claims = random_claims(rng)
        explain = rng.random() < 0.8
        expected = _answer(alone, claims, count=count, explain=explain)
        assert _answer(with_classes, claims, count=count, explain=explain) == expected
        asked += 1
    assert asked == 3
    assert with_classes.asked <= alone.asked


def identical_view(nodes: int) -> ClusterView:
    """`nodes` nodes of four GPUs each, alike but for UUIDs; nothing allocated."""
    rng = random.Random(7)
    node_objects, slices = [], []
    for index in range(nodes):
        name = f"node-{index:03d}"
        node_objects.append({"metadata": {"name": name, "labels": {"rack": "a"}}})
        devices = [{**_gpu(i, rng, model="a100", memory="40Gi"), "taints": []} for i in range(4)]
        slices.append(_slice(f"{name}-gpus", GPU, name, node=name, devices=devices))
    return ClusterView(
        nodes=node_objects,
        classes=CLASSES,
        slices=slices,
        allocated_claims=[],
        fingerprint="identical",
        slice_cache=SliceCache(),
    )


def test_identical_nodes_are_asked_once_per_class() -> None:
    """On 60 identical nodes a question and headroom count=max ask the allocator a handful of
    times (one class, a few states of it as copies fill a node), not once per node."""
    view = identical_view(60)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-gpu", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }
    claims = [InputClaim(obj=claim, source="claims[0]")]
    counts = {}
    answers = {}
    for classes in (True, False):
        sim = Simulation(view, features=Features(), classes=classes)
        answers[classes] = _answer(sim, claims, count=1000, explain=True)
        counts[classes] = sim.asked
    assert answers[True] == answers[False]
    assert answers[True]["headroom"]["placed"] == 240
    # Without classes: every node once, then every copy and the stranded pass.
    assert counts[False] >= 60 + 240
    # With: the first pass once, each of the five states of a node (0-4 GPUs taken) once for
    # the copies, the stranded pass's free devices once.
    assert counts[True] <= 8
    # And as many on six times fewer nodes: the count follows the classes, not the nodes.
    small = Simulation(identical_view(10), features=Features(), classes=True)
    assert _answer(small, claims, count=1000, explain=True)["headroom"]["placed"] == 40
    assert small.asked == counts[True]


@pytest.mark.parametrize("seed", range(10))
def test_classes_follow_allocation_changes(seed: int) -> None:
    """A simulation with classes that follows claims released and allocated (on node pools and
    the shared pool) answers as a fresh simulation of the new state without classes does."""
    rng = random.Random(1000 + seed)
    view = random_view(rng, nodes=8)
    sim = Simulation(view, features=Features(), classes=True)
    sim.keep_verdicts()
    claims = random_claims(rng)
    for step in range(3):
        _answer(sim, claims, count=rng.choice([1, 1000]), explain=True)
        held = list(view.allocated_claims)
        released = rng.sample(held, k=min(len(held), rng.randrange(1, 4)))
        added = _allocated(view.slices, rng)[: rng.randrange(1, 4)]
        for index, claim in enumerate(added):
            claim["metadata"]["name"] = f"new-{step}-{index}"
        new_view = replace(
            view,
            allocated_claims=[c for c in held if c not in released] + added,
            fingerprint=f"step-{step}",
        )
        change = view_change(view, new_view)
        assert not change.rebuild
        sim.follow(new_view, change)
        view = new_view
        fresh = Simulation(view, features=Features(), classes=False)
        assert _answer(sim, claims, count=7, explain=True) == _answer(
            fresh, claims, count=7, explain=True
        )


# Answer fields that differ between two runs of one question whatever the classes.
VOLATILE = {"shareID", "elapsedSeconds"}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE else _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _what_if_both_ways(monkeypatch: pytest.MonkeyPatch, text: str, **options: Any) -> list[Any]:
    answers = []
    for enabled in (True, False):
        monkeypatch.setattr(equivalence, "ENABLED", enabled)
        forget_simulations()
        answers.append(_stable(what_if(text, use_cache=False, **options)))
    return answers


@pytest.mark.parametrize("name", ["deployment.yaml", "batch.yaml", "shared-claim.yaml"])
def test_pods_placed_alike_on_the_demo_cluster(demo, monkeypatch, name: str) -> None:
    """Pods and workloads placed one after another on the 20-node demo cluster (partitioned
    GPUs, NICs, fabric): the same answer with classes on and off."""
    text = (Path(__file__).parent / "fixtures" / name).read_text()
    on, off = _what_if_both_ways(monkeypatch, text)
    assert on == off
    assert on["pods"]


@pytest.mark.parametrize("count", [1, "max"])
def test_demo_headroom_alike(demo, monkeypatch, count: Any) -> None:
    """A two-GPU claim with headroom on the demo cluster: the same answer either way."""
    on, off = _what_if_both_ways(monkeypatch, claim_yaml(count=2), count=count)
    assert on == off
    assert on["summary"]["nodesFit"] > 0
