"""The sync write path: idempotent upserts, pool generations, skips that damage nothing."""

from __future__ import annotations

import copy
import weakref

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from claims.choices import ClaimState
from claims.models import AllocatedDevice, ResourceClaim
from inventory.models import Device, Pool, ResourceSlice, SkippedObject
from inventory.sync import apply_events, replace_all


def gpu_slice(
    name: str,
    *,
    pool: str,
    generation: int,
    count: int = 1,
    devices=("gpu-0",),
    rv: str = "1",
    uid: str | None = None,
) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": rv},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": pool,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": [{"name": d, "attributes": {"model": {"string": "h100"}}} for d in devices],
        },
    }


def claim(name: str, *, rv: str, device: str | None = None) -> dict:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
    }
    if device:
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.example.com",
                            "pool": "node-a",
                            "device": device,
                        }
                    ]
                }
            }
        }
    return obj


@pytest.mark.django_db
def test_replayed_events_change_nothing():
    """Applying the same event twice writes once."""
    event = ("ADDED", gpu_slice("s1", pool="node-a", generation=1))
    first = apply_events("ResourceSlice", [event])
    second = apply_events("ResourceSlice", [event, ("MODIFIED", event[1])])
    # The second state replaces the first before anything is written, and equals the row.
    assert (first.upserted, second.upserted, second.unchanged, second.superseded) == (1, 0, 1, 1)
    assert Device.objects.count() == 1


@pytest.mark.django_db
def test_device_ids_stay_stable_across_updates():
    """Updating a slice updates its devices in place, so links and live ids survive."""
    apply_events(
        "ResourceSlice",
        [("ADDED", gpu_slice("s1", pool="node-a", generation=1, devices=("gpu-0", "gpu-1")))],
    )
    ids = dict(Device.objects.values_list("name", "pk"))
    updated = gpu_slice("s1", pool="node-a", generation=1, devices=("gpu-0", "gpu-2"), rv="2")
    apply_events("ResourceSlice", [("MODIFIED", updated)])
    after = dict(Device.objects.values_list("name", "pk"))
    assert after["gpu-0"] == ids["gpu-0"]
    assert set(after) == {"gpu-0", "gpu-2"}


@pytest.mark.django_db
def test_only_the_highest_generation_counts():
    """A newer generation makes older slices stale and completeness follows the new count."""
    apply_events(
        "ResourceSlice",
        [
            ("ADDED", gpu_slice("old", pool="node-a", generation=1)),
            ("ADDED", gpu_slice("new-1", pool="node-a", generation=2, count=2, devices=("gpu-9",))),
        ],
    )
    pool = Pool.objects.get(name="node-a")
    assert (pool.generation, pool.complete, pool.slices_seen) == (2, False, 1)
    assert not ResourceSlice.objects.get(name="old").current
    assert list(Device.objects.filter(current=True).values_list("name", flat=True)) == ["gpu-9"]
    apply_events(
        "ResourceSlice",
        [
            ("ADDED", gpu_slice("new-2", pool="node-a", generation=2, count=2, devices=("gpu-8",))),
            ("DELETED", gpu_slice("old", pool="node-a", generation=1)),
        ],
    )
    pool.refresh_from_db()
    assert (pool.complete, pool.device_count) == (True, 2)


@pytest.mark.django_db
def test_deleting_last_slice_removes_the_pool():
    """A pool without slices is gone."""
    apply_events("ResourceSlice", [("ADDED", gpu_slice("s1", pool="node-a", generation=1))])
    apply_events("ResourceSlice", [("DELETED", gpu_slice("s1", pool="node-a", generation=1))])
    assert not Pool.objects.exists()
    assert not Device.objects.exists()


@pytest.mark.django_db
def test_malformed_object_is_skipped_and_stored_version_kept():
    """A drifted object is recorded and skipped; the good stored version and the rest survive."""
    apply_events("ResourceClaim", [("ADDED", claim("a", rv="1", device="gpu-0"))])
    drifted = copy.deepcopy(claim("a", rv="2"))
    drifted["spec"]["devices"]["requests"][0]["exactly"]["count"] = "many"
    result = apply_events(
        "ResourceClaim",
        [
            ("MODIFIED", drifted),
            ("ADDED", claim("b", rv="3")),
        ],
    )
    assert len(result.skipped) == 1
    stored = ResourceClaim.objects.get(name="a")
    assert stored.resource_version == "1"
    assert AllocatedDevice.objects.get(claim=stored).device == "gpu-0"
    assert ResourceClaim.objects.filter(name="b").exists()
    skipped = SkippedObject.objects.get()
    assert (skipped.kind, skipped.namespace, skipped.name) == ("ResourceClaim", "ns", "a")
    assert "count" in skipped.error
    # Once the object is valid again the skip record goes away.
    apply_events("ResourceClaim", [("MODIFIED", claim("a", rv="4"))])
    assert not SkippedObject.objects.exists()


@pytest.mark.django_db
def test_recreated_object_replaces_old_uid():
    """Delete-and-recreate under the same name (a missed DELETED event) keeps one row."""
    apply_events("ResourceClaim", [("ADDED", claim("a", rv="1"))])
    recreated = claim("a", rv="5")
    recreated["metadata"]["uid"] = "uid-a-second"
    apply_events("ResourceClaim", [("ADDED", recreated)])
    assert list(ResourceClaim.objects.values_list("uid", flat=True)) == ["uid-a-second"]


@pytest.mark.django_db
def test_replace_all_reconciles():
    """A relist deletes what the list no longer has and keeps the rest."""
    apply_events("ResourceClaim", [("ADDED", claim("a", rv="1")), ("ADDED", claim("b", rv="2"))])
    result = replace_all("ResourceClaim", [(claim("b", rv="2"), None), (claim("c", rv="3"), None)])
    assert sorted(ResourceClaim.objects.values_list("name", flat=True)) == ["b", "c"]
    assert (result.deleted, result.unchanged, result.upserted) == (1, 1, 1)


@pytest.mark.django_db
def test_unknown_kind_is_an_error():
    """A kind without a handler is rejected by name."""
    with pytest.raises(ValueError, match="unsupported kind 'Widget'"):
        apply_events("Widget", [("ADDED", {})])


def stored_rows() -> dict[str, list]:
    """Every slice, device, pool and claim row as plain values, without ids or timestamps."""
    return {
        "slices": sorted(
            ResourceSlice.objects.values_list("name", "pool__name", "generation", "current", "raw")
        ),
        "devices": sorted(
            Device.objects.values_list("slice__name", "name", "pool__name", "current", "spec")
        ),
        "pools": sorted(
            Pool.objects.values_list(
                "name", "generation", "slices_seen", "complete", "device_count"
            )
        ),
        "claims": sorted(ResourceClaim.objects.values_list("name", "state", "allocated_count")),
        "allocated": sorted(AllocatedDevice.objects.values_list("claim__name", "device")),
    }


def mixed_batch() -> tuple[list[dict], list[dict]]:
    slices = [
        gpu_slice(f"s{i}", pool=f"node-{i % 3}", generation=1 + i % 2, count=2, devices=(f"g{i}",))
        for i in range(8)
    ]
    claims = [claim(f"c{i}", rv=str(i), device=f"g{i}" if i % 2 else None) for i in range(6)]
    return slices, claims


@pytest.mark.django_db
def test_one_batch_stores_what_object_by_object_stores():
    """Writing objects in one bulk batch leaves the same rows as writing them one at a time."""
    slices, claims = mixed_batch()
    for obj in slices:
        apply_events("ResourceSlice", [("ADDED", obj)])
    for obj in claims:
        apply_events("ResourceClaim", [("ADDED", obj)])
    one_by_one = stored_rows()
    replace_all("ResourceClaim", [])
    replace_all("ResourceSlice", [])
    assert not Pool.objects.exists()
    apply_events("ResourceSlice", [("ADDED", obj) for obj in slices])
    apply_events("ResourceClaim", [("ADDED", obj) for obj in claims])
    assert stored_rows() == one_by_one


@pytest.mark.django_db
def test_bad_object_among_many_is_skipped_when_writing_in_bulk():
    """A value the database rejects fails the bulk write; the batch is redone object by object."""
    slices = [gpu_slice(f"s{i}", pool=f"node-{i}", generation=1) for i in range(12)]
    # Normalization accepts any integer; the database's 64-bit column does not.
    slices[5]["spec"]["pool"]["generation"] = 2**70
    result = replace_all("ResourceSlice", [(obj, None) for obj in slices])
    assert len(result.skipped) == 1
    assert result.upserted == 11
    assert sorted(ResourceSlice.objects.values_list("name", flat=True)) == sorted(
        f"s{i}" for i in range(12) if i != 5
    )
    assert Device.objects.count() == 11
    assert Pool.objects.filter(complete=True).count() == 11
    skipped = SkippedObject.objects.get()
    assert (skipped.kind, skipped.name) == ("ResourceSlice", "s5")


@pytest.mark.django_db
def test_repeated_object_in_one_batch_keeps_event_order():
    """Events for the same object within one batch apply in order, as if one by one (a later
    state replaces an earlier one before anything is written)."""
    first = gpu_slice("s1", pool="node-a", generation=1, rv="1")
    second = gpu_slice("s1", pool="node-a", generation=1, devices=("gpu-0", "gpu-1"), rv="2")
    result = apply_events(
        "ResourceSlice", [("ADDED", first), ("MODIFIED", second), ("DELETED", second)]
    )
    assert (result.upserted, result.superseded, result.deleted) == (0, 2, 0)
    assert not ResourceSlice.objects.exists()
    apply_events("ResourceSlice", [("ADDED", first), ("DELETED", first), ("ADDED", second)])
    assert sorted(Device.objects.values_list("name", flat=True)) == ["gpu-0", "gpu-1"]
    assert Pool.objects.get().device_count == 2


@pytest.mark.django_db
def test_claim_updates_replace_their_allocations():
    """Changed claims of one batch get their allocated devices replaced; unchanged keep theirs."""
    apply_events(
        "ResourceClaim",
        [("ADDED", claim(f"c{i}", rv="1", device=f"gpu-{i}")) for i in range(3)],
    )
    kept = AllocatedDevice.objects.get(claim__name="c2").pk
    result = apply_events(
        "ResourceClaim",
        [
            ("MODIFIED", claim("c0", rv="2", device="gpu-9")),
            ("MODIFIED", claim("c1", rv="2")),
            ("MODIFIED", claim("c2", rv="1", device="gpu-2")),
        ],
    )
    assert (result.upserted, result.unchanged) == (2, 1)
    assert sorted(AllocatedDevice.objects.values_list("claim__name", "device")) == [
        ("c0", "gpu-9"),
        ("c2", "gpu-2"),
    ]
    assert AllocatedDevice.objects.get(claim__name="c2").pk == kept
    assert ResourceClaim.objects.get(name="c1").state == ClaimState.PENDING
    assert {"gpu.example.com/node-a/gpu-9"} <= result.changed["devices"]


@pytest.mark.django_db
def test_queries_do_not_grow_with_the_batch(django_assert_max_num_queries):
    """A batch of many new slices or claims costs as many queries as a batch of two."""
    slices = [gpu_slice(f"s{i}", pool=f"node-{i}", generation=1) for i in range(60)]
    claims = [claim(f"c{i}", rv="1", device=f"gpu-{i}") for i in range(60)]
    with django_assert_max_num_queries(30):
        apply_events("ResourceSlice", [("ADDED", obj) for obj in slices])
    with django_assert_max_num_queries(15):
        apply_events("ResourceClaim", [("ADDED", obj) for obj in claims])
    assert Device.objects.count() == 60
    assert AllocatedDevice.objects.count() == 60


@pytest.mark.django_db
def test_deletes_and_recreates_under_one_name_share_a_segment(django_assert_max_num_queries):
    """Replaced objects (DELETED, then ADDED under the same name with a new uid, as replaced
    nodes or StatefulSet pods) cost as many queries for 40 as for 2, and leave the new rows."""
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i}", rv="1")) for i in range(40)])
    events = []
    for i in range(40):
        events.append(("DELETED", claim(f"c{i}", rv="2")))
        recreated = claim(f"c{i}", rv="3", device=f"gpu-{i}")
        recreated["metadata"]["uid"] = f"uid-c{i}-second"
        events.append(("ADDED", recreated))
    with django_assert_max_num_queries(20):
        result = apply_events("ResourceClaim", events)
    assert (result.deleted, result.upserted) == (40, 40)
    assert sorted(ResourceClaim.objects.values_list("uid", flat=True)) == sorted(
        f"uid-c{i}-second" for i in range(40)
    )
    assert AllocatedDevice.objects.count() == 40


@pytest.mark.django_db
def test_segments_are_capped_and_keep_event_order(monkeypatch):
    """A batch longer than a segment is written in several, in event order: a delete and a
    recreate under one name that straddle a segment boundary leave the new object."""
    monkeypatch.setattr("inventory.sync.bulk.SEGMENT_SIZE", 4)
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i}", rv="1")) for i in range(10)])
    recreated = claim("c0", rv="3", device="gpu-7")
    recreated["metadata"]["uid"] = "uid-c0-second"
    events = [("MODIFIED", claim(f"c{i}", rv="2")) for i in range(2, 5)]
    events += [("DELETED", claim("c0", rv="2")), ("ADDED", recreated)]
    events += [("MODIFIED", claim(f"c{i}", rv="2")) for i in range(5, 10)]
    events += [("DELETED", claim("c1", rv="2"))]
    result = apply_events("ResourceClaim", events)
    assert (result.deleted, result.superseded) == (2, 0)
    stored = dict(ResourceClaim.objects.values_list("name", "uid"))
    assert sorted(stored) == sorted(f"c{i}" for i in range(10) if i != 1)
    assert stored["c0"] == "uid-c0-second"
    assert set(ResourceClaim.objects.values_list("resource_version", flat=True)) == {"2", "3"}
    assert list(AllocatedDevice.objects.values_list("device", flat=True)) == ["gpu-7"]


@pytest.mark.django_db
def test_a_batch_writes_only_the_last_state_of_an_object():
    """A burst of updates to one object is one write of its last state; a state followed by a
    DELETED is never written."""
    events = [("ADDED", claim("a", rv="1"))]
    events += [("MODIFIED", claim("a", rv=str(rv))) for rv in range(2, 50)]
    events += [("ADDED", claim("b", rv="50")), ("DELETED", claim("b", rv="51"))]
    result = apply_events("ResourceClaim", events)
    assert (result.upserted, result.superseded, result.deleted) == (1, 49, 0)
    assert list(ResourceClaim.objects.values_list("name", "resource_version")) == [("a", "49")]


@pytest.mark.django_db
def test_replace_all_consumes_its_input_once(monkeypatch):
    """A relist hands its objects over one by one: replace_all reads a generator once, and an
    object is no longer held once its segment is written (its reader is a few objects ahead)."""
    monkeypatch.setattr("inventory.sync.bulk.SEGMENT_SIZE", 5)
    monkeypatch.setattr("inventory.sync.batches.PREFETCH_OBJECTS", 3)
    apply_events("ResourceClaim", [("ADDED", claim("gone", rv="1"))])

    class Raw(dict):
        """A dict that can be referenced weakly, to see when the writer lets go of it."""

    pending = [Raw(claim(f"c{i}", rv="1")) for i in range(20)]
    refs = [weakref.ref(raw) for raw in pending]
    held_at_end: list[int] = []

    def handed_over():
        while pending:
            yield pending.pop(0), None
        held_at_end.append(sum(ref() is not None for ref in refs))

    result = replace_all("ResourceClaim", handed_over())
    assert (result.upserted, result.deleted) == (20, 1)
    assert ResourceClaim.objects.count() == 20
    # When the last object has been handed over, only the segment being filled (5), those the
    # reader queued (3) and the one being queued are still held, not the 20.
    assert len(held_at_end) == 1 and held_at_end[0] <= 5 + 3 + 1


@pytest.mark.django_db
def test_pod_secrets_are_never_stored():
    """Env values, commands and last-applied config of pods are dropped; claims and node stay."""
    from claims.models import Pod

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "uid-p",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"env": "hunter2"}',
                "team": "ml",
            },
        },
        "spec": {
            "nodeName": "node-a",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
            "containers": [
                {
                    "name": "main",
                    "image": "example.com/train:1",
                    "command": ["run", "--password=hunter2"],
                    "env": [{"name": "DB_PASSWORD", "value": "hunter2"}],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "volumes": [{"name": "s", "secret": {"secretName": "db"}}],
        },
        "status": {"phase": "Running"},
    }
    apply_events("Pod", [("ADDED", pod)])
    stored = Pod.objects.get()
    assert "hunter2" not in repr(stored.raw) + repr(stored.obj)
    assert stored.raw["metadata"]["annotations"] == {"team": "ml"}
    assert stored.raw["spec"]["containers"] == [
        {"name": "main", "image": "example.com/train:1", "resources": {"claims": [{"name": "gpu"}]}}
    ]
    assert (stored.node_name, stored.container_claims) == ("node-a", {"main": ["gpu"]})


@pytest.mark.django_db
def test_a_pool_is_written_only_when_its_figures_move(monkeypatch):
    """A slice changed in place leaves its pool row alone; a new generation rewrites it."""
    from inventory.sync import slices

    written: list[str] = []

    def counting(model, rows, fields):
        written.extend(row.name for row in rows if model is Pool)
        return update_rows(model, rows, fields)

    update_rows = slices.update_rows
    monkeypatch.setattr(slices, "update_rows", counting)
    apply_events("ResourceSlice", [("ADDED", gpu_slice("s", pool="node-a", generation=1))])
    assert written == ["node-a"]
    relabelled = gpu_slice("s", pool="node-a", generation=1, rv="2")
    relabelled["metadata"]["labels"] = {"team": "ml"}
    result = apply_events("ResourceSlice", [("MODIFIED", relabelled)])
    assert result.upserted == 1
    assert ResourceSlice.objects.get(name="s").labels == {"team": "ml"}
    assert written == ["node-a"]
    apply_events(
        "ResourceSlice",
        [("MODIFIED", gpu_slice("s", pool="node-a", generation=2, count=2, rv="3"))],
    )
    assert written == ["node-a", "node-a"]
    pool = Pool.objects.get(name="node-a")
    assert (pool.generation, pool.resource_slice_count, pool.complete) == (2, 2, False)


@pytest.mark.django_db
def test_many_new_devices_get_their_ids_back():
    """A batch creating more devices than COPY_MIN_ROWS (COPY on PostgreSQL, keyed by slice and
    name) announces every stored device's id, beside devices of a slice stored before."""
    from inventory.sync.core import COPY_MIN_ROWS

    names = [f"gpu-{i}" for i in range(COPY_MIN_ROWS + 10)]
    apply_events("ResourceSlice", [("ADDED", gpu_slice("a", pool="node-a", generation=1))])
    first = set(Device.objects.values_list("pk", flat=True))
    grown = gpu_slice("a", pool="node-a", generation=1, devices=names, rv="2")
    other = gpu_slice("b", pool="node-b", generation=1, devices=names)
    result = apply_events("ResourceSlice", [("MODIFIED", grown), ("ADDED", other)])
    stored = dict(Device.objects.values_list("pk", "slice__name"))
    assert sorted(stored.values()).count("a") == sorted(stored.values()).count("b") == len(names)
    assert first <= set(stored)
    assert {int(pk) for pk in result.changed["devices"]} == set(stored) - first


@pytest.mark.django_db
def test_recreated_names_are_looked_up_within_their_namespaces():
    """New objects' stored namesakes are read by namespace and name, the unique index's
    columns (by name alone PostgreSQL read the whole index), and only those of the same
    namespace are replaced."""
    first = claim("a", rv="1")
    elsewhere = claim("a", rv="2")
    elsewhere["metadata"].update(namespace="other", uid="uid-a-other")
    apply_events("ResourceClaim", [("ADDED", first), ("ADDED", elsewhere)])
    recreated = claim("a", rv="5")
    recreated["metadata"]["uid"] = "uid-a-second"
    with CaptureQueriesContext(connection) as queries:
        apply_events("ResourceClaim", [("ADDED", recreated)])
    namesakes = [
        q["sql"] for q in queries if q["sql"].startswith("SELECT") and '"name" IN' in q["sql"]
    ]
    assert len(namesakes) == 1 and '"namespace" IN' in namesakes[0]
    assert sorted(ResourceClaim.objects.values_list("namespace", "uid")) == [
        ("ns", "uid-a-second"),
        ("other", "uid-a-other"),
    ]


@pytest.mark.django_db
def test_a_watch_batch_larger_than_a_segment_is_written_as_one():
    """A batch of 600 claim updates is one segment (one savepoint): its rows are updated in one
    key order, as the pods watcher re-linking templates locks them (two segments, each in key
    order, deadlocked with it)."""
    apply_events("ResourceClaim", [("ADDED", claim(f"c{i:03}", rv="1")) for i in range(600)])
    with CaptureQueriesContext(connection) as queries:
        result = apply_events(
            "ResourceClaim", [("MODIFIED", claim(f"c{i:03}", rv="2")) for i in range(600)]
        )
    assert result.upserted == 600
    assert sum(q["sql"].startswith("SAVEPOINT") for q in queries) == 1
