"""The sync write path: idempotent upserts, pool generations, skips that damage nothing."""

from __future__ import annotations

import copy

import pytest

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
    assert (first.upserted, second.upserted, second.unchanged) == (1, 0, 2)
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
