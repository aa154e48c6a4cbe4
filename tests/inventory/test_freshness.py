"""The freshness rules (`inventory.freshness`), one state at a time, from SyncState rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inventory.freshness import (
    LIVE,
    SILENT_AFTER,
    SNAPSHOT,
    STALE,
    SWITCHING,
    cluster_freshness,
)
from inventory.models import Namespace, SnapshotImport, SyncState

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 26, 10, 5, 0, tzinfo=UTC)
UID_A = "aaaaaaaa-0000-0000-0000-000000000001"
UID_B = "bbbbbbbb-0000-0000-0000-000000000002"


def synced(kind: str, *, ago: float = 2.0, **fields: Any) -> SyncState:
    """A kind its watcher keeps current: listed, cursor valid, heard from `ago` seconds ago."""
    at = NOW - timedelta(seconds=ago)
    values: dict[str, Any] = {
        "served": True,
        "resource_version": "100",
        "cluster_uid": UID_A,
        "cursor_valid": True,
        "verified_at": at,
        "last_list_at": at,
        "heartbeat_at": at,
        "watcher": f"host:1:{kind}:abc",
    }
    values.update(fields)
    return SyncState.objects.create(kind=kind, **values)


def test_every_kind_current_is_live_as_of_the_oldest_contact() -> None:
    """Live, with the cluster uid and the oldest kind's last contact as asOf."""
    synced("Node", ago=1)
    synced("ResourceSlice", ago=4)
    fresh = cluster_freshness(now=NOW)
    assert (fresh.state, fresh.cluster_uid) == (LIVE, UID_A)
    assert fresh.as_of == NOW - timedelta(seconds=4)
    assert fresh.badge == "synced 4 s ago"
    assert fresh.banner == ""
    assert fresh.answer() == {"uid": UID_A, "state": "live", "asOf": fresh.as_of.isoformat()}


def test_a_failing_watch_is_stale_since_its_last_contact_and_says_why() -> None:
    """last_error set: stale since the last good contact, naming the kind and the error."""
    synced("Node")
    synced(
        "ResourceSlice",
        ago=12,
        last_error="URLError: <urlopen error [Errno 111] Connection refused>",
        last_error_at=NOW,
    )
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == STALE
    assert fresh.since == NOW - timedelta(seconds=12)
    assert fresh.why == "watch of ResourceSlices failing since 10:04 UTC"
    assert fresh.badge == "stale: watch of ResourceSlices failing since 10:04 UTC"
    assert "Connection refused" in fresh.detail and "Connection refused" in fresh.banner
    assert fresh.answer()["state"] == "stale"


def test_several_failing_watches_are_named_together() -> None:
    """The API server gone: every watch fails; one line says so."""
    for kind in ("DeviceClass", "Node", "Pod", "ResourceSlice"):
        synced(kind, ago=20, last_error="ConnectionRefusedError: refused", last_error_at=NOW)
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == STALE
    assert fresh.why == "watches of DeviceClasses, Nodes and 2 more failing since 10:04 UTC"


def test_a_silent_watcher_is_stale() -> None:
    """No batch, heartbeat or list for longer than SILENT_AFTER: the watcher hung or died."""
    synced("Node")
    synced("Pod", ago=SILENT_AFTER.total_seconds() + 1)
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == STALE
    assert fresh.why.startswith("no word from the watcher of Pods since")


def test_a_kind_nobody_watches_is_stale() -> None:
    """A released kind (watcher stopped) is not kept current, however recent its last word."""
    synced("Node")
    synced("Pod", watcher="")
    assert cluster_freshness(now=NOW).why.startswith("no watcher for Pods")


def test_a_kind_never_listed_is_stale_not_switching() -> None:
    """The first list under way: the data is missing, not two states of the cluster."""
    synced("Node")
    synced("Pod", resource_version="", cursor_valid=False, verified_at=None, last_list_at=None)
    fresh = cluster_freshness(now=NOW)
    assert (fresh.state, fresh.why) == (STALE, "Pods not listed yet")


def test_verified_too_long_ago_is_stale() -> None:
    """SyncState.is_stale (not verified for STALE_AFTER) is reused as it is."""
    synced("Node", verified_at=NOW - SyncState.STALE_AFTER - timedelta(seconds=1))
    assert cluster_freshness(now=NOW).why.startswith("Nodes not verified since")


def test_not_served_kinds_are_neutral() -> None:
    """A kind the cluster does not serve neither spoils nor counts toward freshness."""
    synced("Node")
    SyncState.objects.create(kind="ResourceClass", served=False, not_served_reason="no v1alpha2")
    assert cluster_freshness(now=NOW).state == LIVE


def test_kinds_on_two_clusters_are_switching() -> None:
    """One kind dropped its objects for another cluster, the other still holds the old one's."""
    synced("ResourceSlice", ago=6)
    synced(
        "Node",
        ago=1,
        cluster_uid=UID_B,
        resource_version="",
        cursor_valid=False,
        heartbeat_at=NOW - timedelta(seconds=1),
    )
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == SWITCHING
    assert fresh.cluster_uid == UID_B
    assert f"kube-system uid {UID_B}, was {UID_A}" in fresh.why
    assert "relisting Nodes" in fresh.why
    assert fresh.badge == "switching clusters: relisting"
    assert fresh.banner.startswith("Another state of the cluster is being read")


def test_one_cluster_mid_relist_is_still_switching() -> None:
    """Every kind saw the new uid, one has not listed it yet: the tables are not one state."""
    synced("Node", cluster_uid=UID_B)
    synced("ResourceSlice", cluster_uid=UID_B, resource_version="", cursor_valid=False)
    fresh = cluster_freshness(now=NOW)
    assert (fresh.state, fresh.cluster_uid) == (SWITCHING, UID_B)
    assert "relisting ResourceSlices" in fresh.why


def test_a_cursor_the_server_proved_wrong_is_switching() -> None:
    """An etcd restore: same cluster, a cursor ahead of the server; relist under way."""
    synced("Node")
    synced("ResourceSlice", cursor_valid=False)
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == SWITCHING
    assert fresh.why.startswith("the API server went back behind the stored cursor")


def test_an_import_with_no_sync_running_is_a_snapshot() -> None:
    """Imported after the sync last heard from the cluster, no watcher heard from: snapshot."""
    synced("Node", ago=3600, watcher="")
    Namespace.objects.create(uid=UID_A, name="kube-system", api_version="v1", raw={}, obj={})
    imported = SnapshotImport.objects.create(imported_at=NOW - timedelta(minutes=5))
    fresh = cluster_freshness(now=NOW)
    assert (fresh.state, fresh.cluster_uid) == (SNAPSHOT, UID_A)
    assert fresh.as_of == imported.imported_at == fresh.since
    assert fresh.badge == "snapshot imported 10:00 UTC"
    assert fresh.snapshot == imported.pk
    assert fresh.banner == ""


def test_an_import_alone_is_a_snapshot() -> None:
    """No sync ever ran: the imported data is all there is."""
    SnapshotImport.objects.create(imported_at=NOW - timedelta(days=2), merge=True)
    fresh = cluster_freshness(now=NOW)
    assert fresh.state == SNAPSHOT
    assert fresh.badge == "snapshot imported 2026-11-24 10:05 UTC"
    assert fresh.why.startswith("merged into the stored objects")


def test_a_running_sync_outranks_an_import_merged_into_it() -> None:
    """A watcher heard from now keeps the data current whatever was imported meanwhile."""
    synced("Node", ago=2)
    SnapshotImport.objects.create(imported_at=NOW - timedelta(seconds=1), merge=True)
    assert cluster_freshness(now=NOW).state == LIVE


def test_a_sync_started_after_the_import_is_what_counts() -> None:
    """Listed after the import: the sync's state, not the snapshot's."""
    SnapshotImport.objects.create(imported_at=NOW - timedelta(hours=1))
    synced("Node", ago=50, last_error="ConnectionRefusedError: refused")
    assert cluster_freshness(now=NOW).state == STALE


def test_nothing_synced_nothing_imported_is_stale() -> None:
    """A fresh install: stale, 'not synced yet', no time."""
    fresh = cluster_freshness(now=NOW)
    assert (fresh.state, fresh.why, fresh.as_of) == (STALE, "not synced yet", None)
    assert fresh.badge == "stale: not synced yet"
    assert fresh.answer() == {"uid": "", "state": "stale", "asOf": None}


def test_as_dict_is_json_ready() -> None:
    """What /freshness/ answers: every field, per kind too, times in ISO 8601."""
    synced("Node")
    data = cluster_freshness(now=NOW).as_dict()
    assert data["state"] == "live" and data["checkedAt"] == NOW.isoformat()
    assert data["kinds"] == [
        {
            "kind": "Node",
            "state": "live",
            "since": (NOW - timedelta(seconds=2)).isoformat(),
            "why": "",
            "error": "",
            "clusterUid": UID_A,
        }
    ]
