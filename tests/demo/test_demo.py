"""Tests of the demo cluster generator and churn loop: shape, determinism, consistency.

The consistency checks below are written from the Kubernetes rules, independently of the demo's
own bookkeeping: they read only the objects, as a client of the API server would.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter, defaultdict
from typing import Any

import pytest
import yaml

from demo.catalog import ADMIN_CLAIM_SPEC, ADMIN_TEMPLATE, CLAIM_SPECS, DemoError
from demo.churn import DemoChurn
from demo.generator import generate_demo_cluster
from dralib.allocator.quantity import Quantity
from dralib.kube.documents import load_documents

NAMESPACED = {"Pod", "ResourceClaim", "ResourceClaimTemplate", "ResourceQuota"}
WITH_GENERATION = {
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceTaintRule",
    "Pod",
}
UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def quantity(text: str) -> int:
    """Integer value of a quantity in any form (the allocator writes stepped shares as `Ki`)."""
    return Quantity.parse(text).value_int()


@pytest.fixture(scope="module")
def small() -> list[dict[str, Any]]:
    """A 40-node cluster shared by the read-only tests."""
    return generate_demo_cluster(nodes=40, seed=7)


@pytest.fixture(scope="module")
def large() -> list[dict[str, Any]]:
    """The 1,000-node cluster the dashboard demo runs on."""
    return generate_demo_cluster(nodes=1000, seed=42)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def current_pools(objects: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Slices of each pool at its newest generation."""
    pools: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for resource_slice in by_kind(objects, "ResourceSlice"):
        spec = resource_slice["spec"]
        pools[(spec["driver"], spec["pool"]["name"])].append(resource_slice)
    newest = {}
    for key, slices in pools.items():
        top = max(s["spec"]["pool"]["generation"] for s in slices)
        newest[key] = [s for s in slices if s["spec"]["pool"]["generation"] == top]
    return newest


def inventory(objects: list[dict[str, Any]]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """Devices (with their slice's node access) and counter sets of complete pools."""
    devices: dict[tuple[str, str, str], dict[str, Any]] = {}
    counters: dict[tuple[str, str, str], dict[str, int]] = {}
    for (driver, pool), slices in current_pools(objects).items():
        if len(slices) != slices[0]["spec"]["pool"]["resourceSliceCount"]:
            continue
        for resource_slice in slices:
            spec = resource_slice["spec"]
            for counter_set in spec.get("sharedCounters") or []:
                counters[(driver, pool, counter_set["name"])] = {
                    name: quantity(value["value"])
                    for name, value in counter_set["counters"].items()
                }
            for device in spec.get("devices") or []:
                devices[(driver, pool, device["name"])] = {
                    **device,
                    "nodeName": spec.get("nodeName"),
                    "nodeSelector": spec.get("nodeSelector"),
                }
    return devices, counters


def quota_counts(claims: list[dict[str, Any]], classes: dict[str, Any]) -> dict[str, Counter]:
    """Quota usage per namespace, counted by the rules of the Kubernetes claim evaluator."""
    usage: dict[str, Counter] = defaultdict(Counter)
    for claim in claims:
        used = usage[claim["metadata"]["namespace"]]
        used["count/resourceclaims.resource.k8s.io"] += 1
        for request in claim["spec"]["devices"]["requests"]:
            per_class: Counter = Counter()
            if "firstAvailable" in request:
                for sub in request["firstAvailable"]:
                    per_class[sub["deviceClassName"]] = max(
                        per_class[sub["deviceClassName"]], sub.get("count", 1)
                    )
            else:
                exactly = request["exactly"]
                mode = exactly.get("allocationMode", "ExactCount")
                per_class[exactly["deviceClassName"]] = (
                    32 if mode == "All" else exactly.get("count", 1)
                )
            for name, count in per_class.items():
                used[f"{name}.deviceclass.resource.k8s.io/devices"] += count
                used[f"requests.deviceclass.resource.kubernetes.io/{name}"] += count
                extended = classes[name]["spec"].get("extendedResourceName")
                if extended:
                    used[f"requests.{extended}"] += count
    return usage


def check_consistency(objects: list[dict[str, Any]]) -> None:
    """Assert every cross-object rule a real cluster keeps."""
    devices, counters = inventory(objects)
    nodes = {obj["metadata"]["name"]: obj for obj in by_kind(objects, "Node")}
    claims = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c
        for c in by_kind(objects, "ResourceClaim")
    }
    exclusive: dict[Any, Any] = {}
    shared: dict[Any, Counter] = defaultdict(Counter)
    share_ids: set[str] = set()
    counter_use: dict[Any, Counter] = defaultdict(Counter)
    for (_, name), claim in claims.items():
        allocation = claim["status"].get("allocation")
        if not allocation:
            assert not claim["status"].get("reservedFor"), name
            continue
        terms = allocation.get("nodeSelector", {}).get("nodeSelectorTerms", [{}])
        assert len(terms) == 1
        selected = [v for f in terms[0].get("matchFields", []) for v in f["values"]]
        request_names = {r["name"] for r in claim["spec"]["devices"]["requests"]}
        for result in allocation["devices"]["results"]:
            assert result["request"].split("/")[0] in request_names
            key = (result["driver"], result["pool"], result["device"])
            assert key in devices, f"{name}: {key} is not a published device"
            device = devices[key]
            if device["nodeName"]:
                assert selected == [device["nodeName"]], f"{name}: nodeSelector vs {key}"
                assert device["nodeName"] in nodes
            else:
                zone_term = device["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"]
                assert terms[0]["matchExpressions"] == zone_term
            if result.get("adminAccess"):
                continue
            if "shareID" in result:
                assert device.get("allowMultipleAllocations") is True
                assert result["shareID"] not in share_ids
                share_ids.add(result["shareID"])
                for capacity, value in result["consumedCapacity"].items():
                    shared[key][capacity] += quantity(value)
                continue
            assert key not in exclusive, f"{key} held by {exclusive.get(key)} and {name}"
            assert not device.get("taints"), f"{name} holds tainted {key}"
            exclusive[key] = name
            for use in device.get("consumesCounters") or []:
                for counter, value in use["counters"].items():
                    counter_use[(key[0], key[1], use["counterSet"])][counter] += quantity(
                        value["value"]
                    )
    for key, amounts in shared.items():
        assert key not in exclusive
        for capacity, total in amounts.items():
            assert total <= quantity(devices[key]["capacity"][capacity]["value"]), key
    for key, used in counter_use.items():
        for counter, total in used.items():
            assert total <= counters[key][counter], f"{key} {counter}: {total}"
    pods = by_kind(objects, "Pod")
    for pod in pods:
        namespace = pod["metadata"]["namespace"]
        generated = {
            s["name"]: s["resourceClaimName"]
            for s in pod["status"].get("resourceClaimStatuses", [])
        }
        if pod["status"]["phase"] == "Running":
            assert pod["spec"]["nodeName"] in nodes
        else:
            assert "nodeName" not in pod["spec"]
        for entry in pod["spec"].get("resourceClaims", []):
            claim_name = entry.get("resourceClaimName") or generated[entry["name"]]
            claim = claims.get((namespace, claim_name))
            assert claim is not None, f"pod {pod['metadata']['name']} misses claim {claim_name}"
            reserved = [r["uid"] for r in claim["status"].get("reservedFor", [])]
            if pod["status"]["phase"] == "Running":
                assert pod["metadata"]["uid"] in reserved
                assert pod["spec"]["nodeName"] in nodes
                terms = claim["status"]["allocation"].get("nodeSelector", {})
                for term in terms.get("nodeSelectorTerms", []):
                    for field in term.get("matchFields", []):
                        assert field["values"] == [pod["spec"]["nodeName"]]
            else:
                assert "nodeName" not in pod["spec"]
                assert pod["metadata"]["uid"] not in reserved
    check_node_room(pods, nodes)
    pod_uids = {pod["metadata"]["uid"] for pod in pods}
    for claim in claims.values():
        for ref in claim["status"].get("reservedFor", []):
            assert ref["resource"] == "pods" and ref["uid"] in pod_uids
    classes = {c["metadata"]["name"]: c for c in by_kind(objects, "DeviceClass")}
    usage = quota_counts(list(claims.values()), classes)
    for quota in by_kind(objects, "ResourceQuota"):
        expected = usage[quota["metadata"]["namespace"]]
        for key, value in quota["status"]["used"].items():
            assert int(value) == expected[key], f"{quota['metadata']['namespace']} {key}"
            assert int(value) <= int(quota["spec"]["hard"][key])


def exact(text: str) -> Any:
    return Quantity.parse(text).exact


def check_node_room(pods: list[dict[str, Any]], nodes: dict[str, dict[str, Any]]) -> None:
    """What the running pods of a node request fits its allocatable (the demo's pods have no
    init containers or overhead: the sum of their containers), and no host port is bound twice."""
    used: dict[str, Counter] = defaultdict(Counter)
    ports: dict[str, Counter] = defaultdict(Counter)
    for pod in pods:
        if pod["status"]["phase"] != "Running":
            continue
        node = pod["spec"]["nodeName"]
        used[node]["pods"] += 1
        for container in pod["spec"]["containers"]:
            for name, value in container["resources"].get("requests", {}).items():
                used[node][name] += exact(value)
            for port in container.get("ports", []):
                if port.get("hostPort"):
                    ports[node][(port.get("protocol", "TCP"), port["hostPort"])] += 1
    for node, amounts in used.items():
        allocatable = nodes[node]["status"]["allocatable"]
        for name, total in amounts.items():
            assert total <= exact(allocatable[name]), f"{node}: {name} {total}"
        assert all(count == 1 for count in ports[node].values()), f"{node}: {ports[node]}"


def test_same_seed_gives_same_objects() -> None:
    """Two runs with one seed are identical, and another seed differs."""
    first = generate_demo_cluster(nodes=30, seed=3)
    assert json.dumps(first) == json.dumps(generate_demo_cluster(nodes=30, seed=3))
    assert json.dumps(first) != json.dumps(generate_demo_cluster(nodes=30, seed=4))


def test_every_object_has_required_metadata(small: list[dict[str, Any]]) -> None:
    """apiVersion, kind, name, uuid uid, timestamp, labels, namespace and generation are set."""
    uids = set()
    for obj in small:
        meta = obj["metadata"]
        assert obj["apiVersion"] in ("v1", "resource.k8s.io/v1")
        assert obj["apiVersion"] == "v1" or obj["kind"] not in ("Node", "Pod", "Namespace")
        assert meta["name"] and UID.match(meta["uid"]) and TIME.match(meta["creationTimestamp"])
        assert isinstance(meta["labels"], dict)
        assert ("namespace" in meta) == (obj["kind"] in NAMESPACED)
        assert (meta.get("generation") == 1) == (obj["kind"] in WITH_GENERATION)
        assert "resourceVersion" not in meta
        uids.add(meta["uid"])
    assert len(uids) == len(small)


def test_counts_at_one_thousand_nodes(large: list[dict[str, Any]]) -> None:
    """1,000 nodes give 8,000+ devices, about 4,000 claims and about half the GPUs in use."""
    kinds = Counter(obj["kind"] for obj in large)
    assert kinds["Node"] == 1000
    devices, _ = inventory(large)
    assert len(devices) >= 8000
    assert 3500 <= kinds["ResourceClaim"] <= 4500
    gpus = {k for k, d in devices.items() if d["attributes"]["type"]["string"] == "gpu"}
    busy = set()
    for claim in by_kind(large, "ResourceClaim"):
        for result in (
            (claim["status"].get("allocation") or {}).get("devices", {}).get("results", [])
        ):
            if result.get("adminAccess"):
                continue
            device = devices[(result["driver"], result["pool"], result["device"])]
            parent = device["attributes"].get("parentIndex", device["attributes"].get("index"))
            if result["driver"] == "gpu.example.com":
                busy.add((result["pool"], f"gpu-{parent['int']}"))
    assert 0.4 <= len(busy) / len(gpus) <= 0.6


def test_large_cluster_is_consistent(large: list[dict[str, Any]]) -> None:
    """No double allocation, counters and shares within limits, pods and quotas agree."""
    check_consistency(large)


def test_every_claim_shape_gets_allocated(large: list[dict[str, Any]]) -> None:
    """Each claim spec but the whole-node job is allocated somewhere, so every selector works."""
    allocated = [
        claim["spec"]
        for claim in by_kind(large, "ResourceClaim")
        if claim["status"].get("allocation")
    ]
    for name, spec in {**CLAIM_SPECS, ADMIN_TEMPLATE: ADMIN_CLAIM_SPEC}.items():
        # Eight H100s on one node never fit beside the other workloads: it stays pending.
        if name != "h100-octet":
            assert spec in allocated, name


def test_claims_cover_every_state(small: list[dict[str, Any]]) -> None:
    """Pending, allocated-only, reserved, shared, adminAccess, NIC shares and fabric all occur."""
    claims = by_kind(small, "ResourceClaim")
    states = Counter()
    for claim in claims:
        status = claim["status"]
        results = (status.get("allocation") or {}).get("devices", {}).get("results", [])
        states[
            "pending" if not results else "reserved" if status.get("reservedFor") else "allocated"
        ] += 1
        states["shared-by-pods"] += len(status.get("reservedFor", [])) > 1
        states["admin"] += any(r.get("adminAccess") for r in results)
        states["nic-share"] += any("shareID" in r and "consumedCapacity" in r for r in results)
        states["fabric"] += any(r["driver"] == "fabric.example.com" for r in results)
        states["first-available"] += any("/" in r["request"] for r in results)
        states["mig"] += any("-mig-" in r["device"] for r in results)
    for state in (
        "pending",
        "allocated",
        "reserved",
        "shared-by-pods",
        "admin",
        "nic-share",
        "fabric",
        "first-available",
        "mig",
    ):
        assert states[state] > 0, state


def test_inventory_features(small: list[dict[str, Any]]) -> None:
    """MIG pools split counters from devices, NICs are shareable, one pool is incomplete."""
    pools = current_pools(small)
    mig_pools = [s for s in pools.values() if any("sharedCounters" in x["spec"] for x in s)]
    assert mig_pools
    for slices in mig_pools:
        assert len(slices) == 2 == slices[0]["spec"]["pool"]["resourceSliceCount"]
        for resource_slice in slices:
            assert ("sharedCounters" in resource_slice["spec"]) != (
                "devices" in resource_slice["spec"]
            )
            assert len(resource_slice["spec"].get("devices", [])) <= 64
    incomplete = [
        k for k, s in pools.items() if len(s) < s[0]["spec"]["pool"]["resourceSliceCount"]
    ]
    assert incomplete == [("fabric.example.com", "fabric-rack-b")]
    nic = next(s for k, s in pools.items() if k[0] == "nic.example.com")[0]["spec"]["devices"][0]
    assert nic["allowMultipleAllocations"] is True
    assert nic["capacity"]["bandwidth"]["requestPolicy"]["validRange"] == {
        "min": "1G",
        "step": "1G",
    }
    taints = [
        t["effect"]
        for s in by_kind(small, "ResourceSlice")
        for d in s["spec"].get("devices", [])
        for t in d.get("taints", [])
    ]
    assert sorted(taints) == ["NoExecute", "NoSchedule", "NoSchedule"]
    assert len(by_kind(small, "DeviceTaintRule")) == 1
    assert {c["metadata"]["name"] for c in by_kind(small, "DeviceClass")} == {
        "gpu.example.com",
        "gpu-h100",
        "mig-1g.10gb",
        "nic.example.com",
        "fabric.example.com",
    }
    ready = Counter(
        next(c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready")
        for n in by_kind(small, "Node")
    )
    assert ready["True"] > 0 and ready["Unknown"] > 0


def test_ordinary_pods_fill_nodes_on_cpu(small: list[dict[str, Any]]) -> None:
    """Pods without claims run beside the GPU pods: every Ready node runs some, some nodes are
    nearly full on cpu, and most bind the ingress proxy's host port."""
    nodes = {n["metadata"]["name"]: n for n in by_kind(small, "Node")}
    ready = {
        name
        for name, n in nodes.items()
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }
    cpu: Counter = Counter()
    plain: Counter = Counter()
    ingress: set[str] = set()
    for pod in by_kind(small, "Pod"):
        if pod["status"]["phase"] != "Running":
            continue
        node = pod["spec"]["nodeName"]
        for container in pod["spec"]["containers"]:
            cpu[node] += exact(container["resources"]["requests"]["cpu"])
            if any(p.get("hostPort") == 443 for p in container.get("ports", [])):
                ingress.add(node)
        if not pod["spec"].get("resourceClaims"):
            plain[node] += 1
    assert set(plain) == ready
    full = [n for n in ready if cpu[n] >= exact(nodes[n]["status"]["allocatable"]["cpu"]) * 9 / 10]
    assert full, "no node is filled to 90% of its cpu"
    assert len(ingress) >= len(ready) // 2


def test_churn_keeps_the_cluster_consistent(small: list[dict[str, Any]]) -> None:
    """500 steps of churn, applied as events, keep every invariant and match the churn's view."""
    original = copy.deepcopy(small)
    churn = DemoChurn(small, seed=11)
    store = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in small}
    seen: Counter = Counter()
    for step in range(500):
        changes = churn.step()
        assert changes
        for change, obj in changes:
            key = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
            seen[(change, obj["kind"])] += 1
            if change == "ADDED":
                assert key not in store, key
                store[key] = obj
            elif change == "MODIFIED":
                assert key in store, key
                assert store[key]["metadata"]["uid"] == obj["metadata"]["uid"]
                store[key] = obj
            else:
                assert change == "DELETED" and store.pop(key, None) is not None, key
        if step % 25 == 0 or step == 499:
            check_consistency(list(store.values()))
    assert small == original, "the input objects were modified"
    for expected in [
        ("ADDED", "ResourceClaim"),
        ("ADDED", "Pod"),
        ("DELETED", "Pod"),
        ("DELETED", "ResourceClaim"),
        ("MODIFIED", "ResourceClaim"),
        ("MODIFIED", "ResourceSlice"),
        ("DELETED", "Node"),
        ("ADDED", "Node"),
        ("DELETED", "ResourceSlice"),
        ("MODIFIED", "ResourceQuota"),
    ]:
        assert seen[expected] > 0, expected
    key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, churn.objects())) == sorted(map(key, store.values()))


def test_churn_never_gives_a_new_object_a_used_uid(small: list[dict[str, Any]]) -> None:
    """Objects the churn creates get uids no other object of their kind ever had, even with the
    generator's own seed (the sync keys rows by uid, as Kubernetes guarantees uniqueness)."""
    churn = DemoChurn(small, seed=7)
    owner: dict[tuple[str, str], tuple[Any, ...]] = {}
    for obj in small:
        metadata = obj["metadata"]
        owner[(obj["kind"], metadata["uid"])] = (metadata.get("namespace"), metadata["name"])
    added = 0
    for _ in range(300):
        for change, obj in churn.step():
            metadata = obj["metadata"]
            key = (obj["kind"], metadata["uid"])
            name = (metadata.get("namespace"), metadata["name"])
            assert owner.setdefault(key, name) == name, (change, key, owner[key], name)
            added += change == "ADDED"
    assert added > 50


def test_churn_is_deterministic(small: list[dict[str, Any]]) -> None:
    """Two churn loops with one seed produce the same changes."""
    first, second = DemoChurn(small, seed=5), DemoChurn(small, seed=5)
    for _ in range(50):
        assert json.dumps(first.step()) == json.dumps(second.step())


def test_republished_slices_bump_pool_generation(small: list[dict[str, Any]]) -> None:
    """A republished slice keeps its name and uid and carries pool.generation + 1."""
    churn = DemoChurn(small, seed=2)
    before = {s["metadata"]["name"]: s for s in by_kind(small, "ResourceSlice")}
    for _ in range(200):
        for change, obj in churn.step():
            if (
                change == "MODIFIED"
                and obj["kind"] == "ResourceSlice"
                and (obj["metadata"]["name"] in before)
            ):
                old = before[obj["metadata"]["name"]]
                assert obj["metadata"]["uid"] == old["metadata"]["uid"]
                assert obj["spec"]["pool"]["generation"] == old["spec"]["pool"]["generation"] + 1
                return
    pytest.fail("no slice was republished in 200 steps")


@pytest.mark.parametrize("nodes", [0, -1, "5", True])
def test_bad_node_count_is_refused(nodes: Any) -> None:
    """A node count that is not a positive integer raises a DemoError naming the argument."""
    with pytest.raises(DemoError, match="nodes"):
        generate_demo_cluster(nodes=nodes, seed=1)


def test_churn_refuses_malformed_objects() -> None:
    """An object without metadata.name is reported by kind instead of crashing."""
    with pytest.raises(DemoError, match="ResourceSlice"):
        DemoChurn([{"kind": "ResourceSlice", "metadata": {}}], seed=1)


def test_command_writes_a_list(tmp_path: Any) -> None:
    """generate_demo_cluster writes a JSON List or multi-document YAML of the same objects."""
    from django.core.management import call_command

    json_path, yaml_path = tmp_path / "demo.json", tmp_path / "demo.yaml"
    call_command("generate_demo_cluster", nodes=3, seed=9, output=str(json_path), format="json")
    listed = json.loads(json_path.read_text())
    assert listed["apiVersion"] == "v1" and listed["kind"] == "List"
    assert listed["items"] == generate_demo_cluster(nodes=3, seed=9)
    call_command("generate_demo_cluster", nodes=3, seed=9, output=str(yaml_path), format="yaml")
    documents = list(yaml.safe_load_all(yaml_path.read_text()))
    assert documents == listed["items"]
    # The generator shares attribute maps between devices; the file must still be one the
    # dashboard's own reader takes (it refuses anchors), not only PyYAML's.
    read_back = [document.value for document in load_documents(yaml_path.read_text())]
    assert read_back == listed["items"]
