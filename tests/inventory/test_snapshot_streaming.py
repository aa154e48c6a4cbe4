"""Snapshot import written as it is read: rolled back whole, the same in any order, unchanged
objects stored once decoded, and objects a normalizer rewrites kept as written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from demo.generator import generate_demo_cluster
from inventory.models import Device, DeviceClass, Namespace, Node, Pool, ResourceSlice
from inventory.snapshot import IMPORT_CACHE_KIB, SnapshotError, bulk_load, import_texts
from inventory.sync import HANDLERS, insert_rows
from inventory.sync.bulk import SEGMENT_SIZE
from inventory.sync.core import _same_entries


def _listed(items: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def _namespace(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": f"ns-{index}", "uid": f"u-ns-{index}"},
    }


def _bad_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "uid": f"u-{name}"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
    }


@pytest.mark.django_db
def test_a_bad_object_after_written_segments_rolls_everything_back() -> None:
    """Objects already written in earlier segments are gone when a later one is invalid, and
    the message lists every invalid object, not only the first."""
    import_texts([("before.json", _listed([_namespace(0)]))])
    items = [_namespace(index) for index in range(1, 2 * SEGMENT_SIZE + 2)]
    items += [_bad_class("first"), _namespace(9999), _bad_class("second")]
    with pytest.raises(SnapshotError) as raised:
        import_texts([("many.json", _listed(items))])
    message = str(raised.value)
    assert "2 invalid object(s); nothing was imported" in message
    assert "DeviceClass first" in message and "DeviceClass second" in message
    assert "spec.selectors[0].cel.expression" in message
    assert list(Namespace.objects.values_list("name", flat=True)) == ["ns-0"]
    assert not DeviceClass.objects.exists()


def _state() -> dict[str, list[tuple[Any, ...]]]:
    """What an import leaves, without primary keys or write times."""
    return {
        "nodes": sorted(Node.objects.values_list("name", "ready", "raw")),
        "slices": sorted(ResourceSlice.objects.values_list("name", "pool__name", "current")),
        "pools": sorted(
            Pool.objects.values_list("driver", "name", "complete", "device_count", "node_name")
        ),
        "devices": sorted(Device.objects.values_list("slice__name", "name", "tainted")),
        "claims": sorted(
            ResourceClaim.objects.values_list(
                "namespace", "name", "state", "node_name", "template_name", "owner_pod"
            )
        ),
        "allocated": sorted(
            AllocatedDevice.objects.values_list("claim__name", "driver", "pool", "device")
        ),
        "reservations": sorted(Reservation.objects.values_list("claim__name", "name")),
        "pods": sorted(Pod.objects.values_list("namespace", "name", "uses_claims", "raw")),
    }


@pytest.mark.django_db
def test_kinds_in_any_order_give_the_same_state() -> None:
    """A file listing pods before claims and slices before classes (kinds are written as they
    come) leaves what the registered order leaves: templates linked, pools complete."""
    objects = generate_demo_cluster(nodes=6, seed=3)
    rank = {kind: index for index, kind in enumerate(HANDLERS)}
    ordered = sorted(objects, key=lambda item: rank[item["kind"]])
    import_texts([("ordered.json", _listed(ordered))])
    expected = _state()
    assert expected["claims"] and any(row[4] for row in expected["claims"])
    for model in (Pod, ResourceClaim, ResourceSlice, Node, Pool, DeviceClass, Namespace):
        model.objects.all().delete()
    import_texts([("reversed.json", _listed(list(reversed(ordered))))])
    assert _state() == expected


@pytest.mark.django_db
def test_a_rewritten_object_keeps_raw_as_written_and_an_unchanged_one_is_equal() -> None:
    """A v1beta1 class is stored as written beside its v1 form; a v1 node's raw and obj are
    the object as written."""
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu", "uid": "u-gpu"},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "u-n"}}
    import_texts([("mixed.json", _listed([beta, node]))])
    stored = DeviceClass.objects.get(name="gpu")
    assert stored.raw == beta
    assert stored.obj["apiVersion"] == "resource.k8s.io/v1"
    assert stored.obj["spec"] == beta["spec"]
    row = Node.objects.get(name="n")
    assert row.raw == node and row.obj == node


@pytest.mark.django_db
def test_an_imported_pod_is_redacted_in_both_forms() -> None:
    """A pod handed to the writer as one value (unchanged by normalizing) loses its secrets in
    raw and obj alike, and keeps what the pages read."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "uid": "u-p",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
        },
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
            "containers": [
                {
                    "name": "main",
                    "env": [{"name": "TOKEN", "value": "s3cret"}],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "volumes": [{"name": "v", "secret": {"secretName": "s"}}],
        },
    }
    import_texts([("pod.json", _listed([pod]))])
    row = Pod.objects.get(name="p")
    for stored in (row.raw, row.obj):
        assert "s3cret" not in json.dumps(stored)
        assert "volumes" not in stored["spec"]
        assert stored["metadata"]["annotations"] == {}
        assert stored["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}


def _cache_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db
def test_the_bulk_load_cache_is_this_imports_only() -> None:
    """On SQLite an import runs with its larger page cache and leaves the connection's own
    setting (and the journal mode) as it found them, after a success and after a failure."""
    if connection.vendor != "sqlite":
        # PostgreSQL has no page cache per connection to set: the import leaves it alone.
        import_texts([("ns.json", _listed([_namespace(1)]))])
        assert Namespace.objects.count() == 1
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        journal = cursor.fetchone()[0]
    before = _cache_size()
    seen: list[int] = []
    with bulk_load():
        seen.append(_cache_size())
    assert seen == [-IMPORT_CACHE_KIB] != [before]
    import_texts([("ns.json", _listed([_namespace(1)]))])
    assert _cache_size() == before
    with pytest.raises(SnapshotError):
        import_texts([("bad.json", _listed([_namespace(2), _bad_class("broken")]))])
    assert _cache_size() == before
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == journal
    assert list(Namespace.objects.values_list("name", flat=True)) == ["ns-1"]


@pytest.mark.django_db
def test_raw_and_obj_copies_of_one_object_are_dumped_once_and_stored_alike() -> None:
    """Raw and obj made from one dict share one dump; values that only compare equal (a
    boolean for a number, keys in another order) are dumped on their own and stored as given."""
    shared = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "u-n"}}
    assert _same_entries(dict(shared), dict(shared))
    assert not _same_entries({"a": 1}, {"a": True})
    assert not _same_entries({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not _same_entries({"a": [1]}, {"a": [1]})  # equal, not the same list
    node = Node(uid="u-n", name="n", raw={"x": 1, "y": 2}, obj={"y": 2, "x": True}, labels={})
    insert_rows(Node, [node], returning=("uid",))
    with connection.cursor() as cursor:
        cursor.execute("SELECT raw, obj FROM inventory_node WHERE uid = 'u-n'")
        raw, obj = cursor.fetchone()
    assert json.loads(raw) == {"x": 1, "y": 2} and list(json.loads(raw)) == ["x", "y"]
    assert json.loads(obj) == {"y": 2, "x": True} and json.loads(obj)["x"] is True
