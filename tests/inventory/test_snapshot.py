"""Snapshot import and export: all or nothing, errors that point at the field, round trips."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from claims.choices import ClaimState
from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from dralib.kube.documents import list_items
from inventory.models import Device, DeviceClass, Namespace, Node, Pool, ResourceSlice
from inventory.snapshot import SnapshotError, import_files, import_texts, write_snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "snapshot"


@pytest.fixture
def small_cluster(db):
    return import_files([FIXTURES / "small-cluster.yaml"])


def test_import_fills_every_kind(small_cluster):
    """A kubectl List lands as nodes, classes, slices, pools, devices, claims and pods."""
    assert set(Node.objects.values_list("name", flat=True)) == {"node-a", "node-b"}
    assert Node.objects.get(name="node-a").ready
    assert not Node.objects.get(name="node-b").ready
    assert DeviceClass.objects.get().name == "gpu.example.com"
    assert ResourceSlice.objects.count() == 2
    assert Device.objects.count() == 3
    assert Device.objects.get(name="gpu-1").tainted


def test_pool_completeness(small_cluster):
    """A pool with all slices of its generation is complete; one missing a slice is not."""
    local = Pool.objects.get(driver="gpu.example.com", name="node-a")
    assert (local.complete, local.generation, local.node_name, local.device_count) == (
        True,
        1,
        "node-a",
        2,
    )
    fabric = Pool.objects.get(name="fabric-rack-a")
    assert (fabric.complete, fabric.slices_seen, fabric.resource_slice_count) == (False, 1, 2)


def test_claims_state_allocation_and_reservations(small_cluster):
    """Claim state, allocated devices and reservations come from status."""
    train = ResourceClaim.objects.get(namespace="team-a", name="train-0")
    assert train.state == ClaimState.RESERVED
    assert train.node_name == "node-a"
    assert train.device_classes == ["gpu.example.com"]
    device = AllocatedDevice.objects.get(claim=train)
    assert device.key == "gpu.example.com/node-a/gpu-0"
    assert Reservation.objects.get(claim=train).name == "train-0-pod"
    assert ResourceClaim.objects.get(name="waiting").state == ClaimState.PENDING


def test_only_pods_with_claims_are_kept_whole(small_cluster):
    """Every pod is stored; one that references no claims as its projection only (no object);
    untracked kinds are reported."""
    assert list(Pod.objects.values_list("name", flat=True)) == ["train-0-pod", "web"]
    assert Pod.objects.get(name="train-0-pod").container_claims == {"main": ["gpu"]}
    web = Pod.objects.get(name="web")
    assert (web.uses_claims, web.raw, web.obj, web.resource_claims) == (False, {}, {}, [])
    assert small_cluster.ignored == {"ConfigMap": 1}
    assert not small_cluster.not_stored


def test_namespaces_are_imported_with_their_labels(small_cluster):
    """Namespace documents are stored with their labels (what-if's admin-access check)."""
    namespace = Namespace.objects.get(name="team-a")
    assert namespace.labels == {"resource.kubernetes.io/admin-access": "true"}
    assert small_cluster.objects["Namespace"] == 1


def test_invalid_input_names_file_document_and_field(db):
    """One bad field aborts the whole import and the message points at it."""
    with pytest.raises(SnapshotError) as error:
        import_files([FIXTURES / "bad-field.yaml"])
    message = str(error.value)
    assert "bad-field.yaml document 2" in message
    assert "spec.devices.requests[0]" in message
    assert "count" in message
    assert "nothing was imported" in message
    assert not DeviceClass.objects.exists()


def test_failed_import_keeps_what_was_stored(small_cluster):
    """A rejected import leaves the stored state exactly as it was."""
    before = sorted(ResourceClaim.objects.values_list("uid", "resource_version"))
    with pytest.raises(SnapshotError):
        import_files([FIXTURES / "bad-field.yaml"])
    assert sorted(ResourceClaim.objects.values_list("uid", "resource_version")) == before
    assert DeviceClass.objects.filter(name="gpu.example.com").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: [unclosed", "input.yaml document 1 line 2: invalid YAML"),
        ('{"kind": ', "invalid JSON"),
        ("- 1\n- 2\n", "expected an object"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "kind: required"),
        (
            "apiVersion: resource.k8s.io/v9\nkind: ResourceSlice\nmetadata: {name: x}\nspec: {}\n",
            "resource.k8s.io/v9",
        ),
    ],
)
def test_malformed_documents(db, text, expected):
    """Malformed YAML/JSON and unknown versions are clear errors, not crashes."""
    with pytest.raises(SnapshotError, match=expected.replace("[", r"\[")):
        import_texts([("input.yaml", text)])


def test_full_import_removes_objects_no_longer_present(small_cluster):
    """Re-importing a smaller snapshot of a kind deletes what it no longer lists."""
    text = (FIXTURES / "small-cluster.yaml").read_text()
    document = yaml.safe_load(text)
    document["items"] = [i for i in document["items"] if i["metadata"]["name"] != "waiting"]
    import_texts([("smaller.yaml", yaml.safe_dump(document))])
    assert not ResourceClaim.objects.filter(name="waiting").exists()
    assert ResourceClaim.objects.filter(name="train-0").exists()


def test_merge_keeps_objects_missing_from_input(small_cluster):
    """--merge only adds and updates."""
    import_texts(
        [
            (
                "one.yaml",
                "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
                "metadata: {name: extra, uid: u-extra}\nspec: {}\n",
            )
        ],
        merge=True,
    )
    assert set(DeviceClass.objects.values_list("name", flat=True)) == {"gpu.example.com", "extra"}


def test_reimport_is_idempotent(small_cluster):
    """Importing the same snapshot again writes nothing."""
    report = import_files([FIXTURES / "small-cluster.yaml"])
    assert report.result.upserted == 0
    assert report.result.deleted == 0


def test_export_then_import_round_trips(small_cluster, tmp_path):
    """export_snapshot writes the original objects; importing them changes nothing."""
    out = io.StringIO()
    count = write_snapshot(out, fmt="yaml")
    exported = yaml.safe_load(out.getvalue())
    assert exported["kind"] == "List"
    # 2 nodes, 1 namespace, 1 class, 2 slices, 2 claims, the pod that uses a claim (as it
    # came) and the one that uses none (its projection, as a pod).
    assert count == len(exported["items"]) == 10
    path = tmp_path / "export.yaml"
    path.write_text(out.getvalue())
    report = import_files([path])
    assert (report.result.upserted, report.result.deleted) == (0, 0)


def test_commands(small_cluster, tmp_path):
    """The management commands wrap import and export and turn errors into CommandError."""
    target = tmp_path / "out.json"
    call_command("export_snapshot", "--format", "json", "--output", str(target))
    assert '"kind": "List"' in target.read_text()
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_snapshot", str(FIXTURES / "bad-field.yaml"))


def test_deeply_nested_input_is_an_error(db):
    """A YAML bomb of nesting gets a message, not a RecursionError traceback."""
    # Deeper than any recursion limit in force (the allocator raises it once per process).
    depth = sys.getrecursionlimit() * 2
    text = "a: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(SnapshotError, match="deep.yaml document 1 line 1: nested deeper than 64"):
        import_texts([("deep.yaml", text)])


def test_same_object_twice_is_rejected_naming_both_places(db):
    """Two objects with one name (or one uid) in an import are ambiguous and refused."""
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c1, uid: a1}\n"
        "spec: {}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c1, uid: a2}\n"
        "spec: {}\n"
    )
    with pytest.raises(SnapshotError) as error:
        import_texts([("twice.yaml", text)])
    assert "twice.yaml document 2" in str(error.value)
    assert "also at twice.yaml document 1" in str(error.value)
    assert not DeviceClass.objects.exists()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            "spec:\n  driver: d\n  nodeName: n\n  pool: {name: p, generation: 1, "
            "resourceSliceCount: 1}\n  devices: [{name: a}, {name: a}]\n",
            "spec.devices[1].name",
        ),
        (
            "spec:\n  driver: d\n  nodeName: n\n  pool: {name: p, generation: 9223372036854775808,"
            " resourceSliceCount: 1}\n",
            "spec.pool.generation",
        ),
    ],
)
def test_impossible_slices_are_rejected(db, spec, field):
    """A device listed twice or an out-of-range generation is refused with the field path."""
    text = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s, uid: u}\n"
    with pytest.raises(SnapshotError, match=field.replace("[", r"\[")):
        import_texts([("slice.yaml", text + spec)])


@pytest.mark.parametrize(
    ("requests", "field", "reason"),
    [
        (
            "[{name: gpu, exactly: {deviceClassName: c, count: -3}}]",
            r"spec.devices.requests\[0\].exactly.count",
            "at least 1",
        ),
        (
            "[{name: gpu, exactly: {deviceClassName: c}},"
            " {name: gpu, exactly: {deviceClassName: c}}]",
            r"spec.devices.requests\[1\].name",
            "duplicate request 'gpu'",
        ),
    ],
)
def test_impossible_claims_are_rejected(db, requests, field, reason):
    """Claims the API server would refuse (count below 1, two requests of one name) are refused."""
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
        "metadata: {name: c, namespace: ns, uid: u}\n"
        f"spec:\n  devices:\n    requests: {requests}\n"
    )
    with pytest.raises(SnapshotError, match=f"{field}: .*{reason}"):
        import_texts([("claim.yaml", text)])


def test_objects_are_stored_exactly_as_written(db):
    """`raw` is the object as written: floats, unicode and integers of any size.

    (Key order is not kept on PostgreSQL, whose jsonb orders keys its own way.)
    """
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-z",
            "uid": "7d9d3d6b-0000-4000-8000-000000000001",
            "annotations": {"note": "ünïcode ✓", "z": "1", "a": "2"},
        },
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {"capacity": {"cpu": "8"}, "example.com/ratio": 0.1, "example.com/n": 2**70},
    }
    listed = {"apiVersion": "v1", "kind": "List", "items": [node]}
    import_texts([("nodes.json", json.dumps(listed))])
    stored = Node.objects.get(name="node-z").raw
    assert stored == node
    assert stored["status"]["example.com/n"] == 2**70


def test_list_items_can_hand_each_item_over() -> None:
    """With consume, the list lets go of each item once the caller moved on."""
    listed = {"kind": "List", "items": [{"kind": "Pod"}, {"kind": "Node"}]}
    seen = []
    for path, item in list_items(listed, consume=True):
        seen.append((path, item["kind"], list(listed["items"])))
    assert seen[0] == ("items[0]", "Pod", [{"kind": "Pod"}, {"kind": "Node"}])
    assert seen[1] == ("items[1]", "Node", [None, {"kind": "Node"}])
    assert listed["items"] == [None, None]


@pytest.mark.django_db
def test_a_json_list_keeps_fields_newer_than_our_code_and_integers_past_64_bits():
    """Objects come back whole, one with a 70-bit integer (normalized as a copy) included."""
    huge = 2**70
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "big", "uid": "u-big"},
        "spec": {"futureField": {"count": huge}},
    }
    plain = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "u-n"}}
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, plain]})
    report = import_texts([("big.json", text)])
    assert report.objects["Node"] == 2
    assert Node.objects.get(name="big").raw["spec"]["futureField"]["count"] == huge
    assert Node.objects.get(name="n").raw == plain
