"""Every page says how current its data is; /freshness/ and /readyz say it in the same words;
live updates reach a pool's page by its name and reach every page after a snapshot import."""

from __future__ import annotations

import copy
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.consumers import parse_topic
from console.live import concerns, prime_holders
from dashboard.live import ChangedEvent
from inventory.models import Device, Node, Pool, ResourceSlice, SyncState
from inventory.snapshot import import_files
from inventory.sync import apply_events
from tests.paths import ROOT

SNAPSHOT = ROOT / "tests" / "inventory" / "fixtures" / "snapshot" / "small-cluster.yaml"
BADGE = re.compile(r'<a id="sync-status"[^>]*data-state="(\w+)"[^>]*>([^<]*)</a>')
BANNER = re.compile(r'<div id="freshness-banner"[^>]*?( hidden)?>([^<]*)</div>')


def sync_state(kind: str, **fields: Any) -> SyncState:
    now = timezone.now()
    values: dict[str, Any] = {
        "resource_version": "100",
        "cluster_uid": "uid-a",
        "cursor_valid": True,
        "verified_at": now,
        "last_list_at": now,
        "heartbeat_at": now,
        "watcher": f"host:1:{kind}:abc",
    }
    values.update(fields)
    return SyncState.objects.create(kind=kind, **values)


def header(client: Client, url: str) -> tuple[str, str, bool, str]:
    """(badge state, badge text, banner shown, banner text) of a page."""
    html = client.get(url).content.decode()
    badge, banner = BADGE.search(html), BANNER.search(html)
    assert badge and banner, "the page has no freshness badge or banner"
    return badge[1], badge[2], banner[1] is None, banner[2]


def test_the_freshness_endpoint_needs_a_reader(db, client: Client, viewer_client: Client) -> None:
    """Anonymous: the login page; signed in: the freshness as JSON, never cached."""
    assert client.get(reverse("freshness")).status_code == 302
    sync_state("Node")
    response = viewer_client.get(reverse("freshness"))
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]
    data = response.json()
    assert data["state"] == "live" and data["clusterUid"] == "uid-a"
    assert data["badge"].startswith("synced ") and data["banner"] == ""
    assert [k["kind"] for k in data["kinds"]] == ["Node"]


@pytest.mark.parametrize("name", ["overview", "pool-list", "claim-list", "what-if", "sync-status"])
def test_every_page_shows_a_live_sync_as_synced(db, viewer_client: Client, name: str) -> None:
    """The badge says how old the synced data is, and no banner shows."""
    sync_state("Node")
    state, text, shown, _ = header(viewer_client, reverse(name))
    assert state == "live" and re.fullmatch(r"synced \d+ s ago", text)
    assert not shown


def test_a_failing_watch_turns_every_page_stale_with_a_banner(db, viewer_client: Client) -> None:
    """The badge names the failing watch and since when; the banner says the data may be old."""
    sync_state("Node")
    sync_state(
        "ResourceSlice",
        heartbeat_at=timezone.now() - timedelta(seconds=40),
        last_error="URLError: <urlopen error [Errno 111] Connection refused>",
        last_error_at=timezone.now(),
    )
    for name in ("overview", "pool-list", "device-list"):
        state, text, shown, banner = header(viewer_client, reverse(name))
        assert state == "stale"
        assert text.startswith("stale: watch of ResourceSlices failing since ")
        assert shown and banner.startswith("The data shown may be out of date: watch of")
        assert "Connection refused" in banner


def test_a_cluster_switch_shows_its_banner(db, viewer_client: Client) -> None:
    """Kinds on two clusters: switching, with the new uid in the banner."""
    sync_state("Node")
    sync_state("ResourceSlice", cluster_uid="uid-b", resource_version="", cursor_valid=False)
    state, text, shown, banner = header(viewer_client, reverse("overview"))
    assert (state, text) == ("switching", "switching clusters: relisting")
    assert shown and "kube-system uid uid-b, was uid-a" in banner


def test_an_imported_snapshot_says_so_not_live(db, viewer_client: Client) -> None:
    """The issue: an imported snapshot showed "Live"; it shows when it was imported."""
    import_files([SNAPSHOT])
    state, text, shown, _ = header(viewer_client, reverse("overview"))
    assert state == "snapshot" and text.startswith("snapshot imported ")
    assert not shown
    # The overview's sync card says the same, not "the sync has not run yet".
    body = viewer_client.get(reverse("overview")).content.decode()
    assert "No sync runs here: snapshot imported " in body
    assert "The sync has not run yet" not in body


def test_nothing_synced_is_stale_not_live(db, viewer_client: Client) -> None:
    """A fresh install shows "not synced yet" and the banner."""
    state, text, shown, _ = header(viewer_client, reverse("overview"))
    assert (state, text, shown) == ("stale", "stale: not synced yet", True)


def test_the_login_page_has_no_badge(db, client: Client) -> None:
    """Before signing in there is nothing to be current about."""
    assert 'id="sync-status"' not in client.get(reverse("login")).content.decode()


def test_the_socket_indicator_no_longer_claims_live_data(db, viewer_client: Client) -> None:
    """The socket's indicator stays (connecting/connected/offline); the data's is the badge."""
    html = viewer_client.get(reverse("overview")).content.decode()
    assert '<span id="live-status" data-state="connecting"' in html
    script = (ROOT / "static" / "dashboard" / "live.js").read_text()
    assert 'setStatus("online", "Live")' not in script


def test_readyz_carries_the_freshness(db, client: Client, settings) -> None:
    """/readyz says the same as the header, in its body and in the sync check's detail."""
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    sync_state(
        "Node",
        heartbeat_at=timezone.now() - timedelta(seconds=50),
        last_error="ConnectionRefusedError: refused",
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["freshness"]["state"] == "stale"
    sync = next(c for c in body["checks"] if c["name"] == "sync")
    assert "freshness: stale (watch of Nodes failing since" in sync["detail"]


def _event(topic: str, ids: list[str]) -> ChangedEvent:
    return {"type": "live.changed", "topic": topic, "ids": ids, "seq": "1"}


def _replaced(raw: dict[str, Any], *, rename: bool = False) -> dict[str, Any]:
    fresh = copy.deepcopy(raw)
    meta = fresh["metadata"]
    meta["uid"] = str(uuid.uuid4())
    meta["resourceVersion"] = f"{meta.get('resourceVersion') or '1'}7"
    if rename:
        meta["name"] = f"{meta['name']}-r{uuid.uuid4().hex[:5]}"
    return fresh


def test_a_pool_page_follows_its_pool_across_a_node_replacement(demo) -> None:
    """The issue: a pool page followed `pool:<row id>`; its node replaced, the pool got a new
    row and the page stopped updating. Followed by name, the new row's changes reach it, and so
    does the old row's deletion."""
    pool = Pool.objects.filter(node_name__gt="").order_by("driver", "name").first()
    sub = parse_topic(f"pool:{pool.driver}/{pool.name}")
    prime_holders([sub])
    old_pk = pool.pk
    node = Node.objects.get(name=pool.node_name).raw
    slices = [s.raw for s in ResourceSlice.objects.filter(pool=pool)]
    apply_events("ResourceSlice", [("DELETED", raw) for raw in slices], publish=False)
    apply_events("Node", [("DELETED", node)], publish=False)
    assert concerns(sub, _event("pools", [str(old_pk)]))
    apply_events("Node", [("ADDED", _replaced(node))], publish=False)
    apply_events(
        "ResourceSlice", [("ADDED", _replaced(s, rename=True)) for s in slices], publish=False
    )
    new = Pool.objects.get(driver=pool.driver, name=pool.name)
    assert new.pk != old_pk
    device = Device.objects.filter(pool=new).first()
    assert concerns(sub, _event("pools", [str(new.pk)]))
    assert concerns(sub, _event("devices", [str(device.pk)]))
    other = Pool.objects.exclude(pk=new.pk).first()
    assert not concerns(sub, _event("pools", [str(other.pk)]))


@pytest.mark.parametrize(
    "topic",
    ["pool:gpu.example.com/node-a", "node:node-a", "namespace:team-a", "overview", "devices"],
)
@pytest.mark.parametrize("group", ["pools", "slices", "devices", "claims", "pods"])
def test_a_coarse_change_concerns_every_scope(db, topic: str, group: str) -> None:
    """A snapshot import publishes `*`: every page following one of its groups refreshes."""
    sub = parse_topic(topic)
    if group in sub.groups or sub.kind in ("overview", "generic"):
        assert concerns(sub, _event(group, ["*"]))


def test_the_sync_page_says_the_freshness_in_full(db, viewer_client: Client) -> None:
    """The badge links to the sync page, which says the state, why, since when, which cluster."""
    sync_state("Node", last_error="ConnectionRefusedError: refused")
    html = viewer_client.get(reverse("sync-status")).content.decode()
    card = html[html.index('id="sync-freshness"') :]
    card = card[: card.index("</div>")]
    assert "stale" in card and "Watch of Nodes failing since" in card
    assert "ConnectionRefusedError: refused" in card and "uid-a" in card


def test_the_what_if_page_says_when_its_answer_is_not_live(demo, viewer_client: Client) -> None:
    """A what-if on data no sync keeps current says so above its result."""
    response = viewer_client.post(reverse("what-if"), {"template": "", "yaml": CLAIM, "count": "1"})
    html = response.content.decode()
    assert 'id="what-if-cluster"' in html
    assert "a stale state of the cluster: the sync is not current" in html
    sync_state("Node")
    html = viewer_client.post(
        reverse("what-if"), {"template": "", "yaml": CLAIM, "count": "1"}
    ).content.decode()
    assert 'id="what-if-result"' in html and 'id="what-if-cluster"' not in html


CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, count: 1}
"""
