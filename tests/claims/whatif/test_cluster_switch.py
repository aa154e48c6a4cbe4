"""What-if answers say which cluster answered and how current it was, and never mix two.

The issue: another cluster started at the API server's address, and for a few seconds the same
what-if counted the old cluster's nodes with the new one's. Here the watchers sync a fake API
server for real; it is replaced by another cluster (another kube-system uid) at the same port
while what-ifs run one after another, and every answer must be of one cluster: its nodes and
pools carry one cluster's prefix, and every node of it has its devices (a half-listed cluster
would leave nodes without slices).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from claims.whatif.service import what_if
from dralib.kube.client import KubeClient, load_client
from dralib.kube.fakeapi import FakeApiServer
from inventory.freshness import cluster_freshness
from inventory.models import Node, SyncState
from inventory.sync.watch import write_guard
from tests.claims.whatif.conftest import load_objects
from tests.claims.whatif.helpers import URL, claim_yaml
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import FAST, Watchers, wait_for

KINDS = ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "Pod")
CLUSTER_A = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
CLUSTER_B = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"
PREFIX = {CLUSTER_A: "a-", CLUSTER_B: "b-"}


def populate(server: FakeApiServer, prefix: str, nodes: int) -> None:
    server.apply(objects.device_class("gpu.example.com"))
    for i in range(nodes):
        name = f"{prefix}node-{i}"
        server.apply(objects.node(name))
        server.apply(objects.resource_slice(f"{name}-gpu", node_name=name))


def cluster(port: int, uid: str, prefix: str, nodes: int) -> FakeApiServer:
    server = FakeApiServer(port=port, cluster_uid=uid, bookmark_interval=0.3, too_large_wait=0.2)
    populate(server, prefix, nodes)
    server.start()
    return server


@pytest.fixture
def switchable(tmp_path: Path) -> Iterator[tuple[list[FakeApiServer], Callable[[], KubeClient]]]:
    """Cluster A (3 nodes) on a port; the list holds whichever server runs there now."""
    first = cluster(0, CLUSTER_A, "a-", 3)
    servers = [first]
    kubeconfig = first.write_kubeconfig(tmp_path / "kubeconfig")
    yield servers, lambda: load_client(kubeconfig=kubeconfig)
    for server in servers:
        server.stop()


def ask(api: APIClient) -> tuple[int, dict[str, Any]]:
    # Shared-cache SQLite: reads wait while a watcher thread writes.
    with write_guard():
        response = api.post(URL, {"yaml": claim_yaml(count=1)}, format="json")
    return response.status_code, response.json()


def one_cluster(answer: dict[str, Any]) -> str:
    """The one cluster prefix of the answer's nodes and devices' pools; fails on a mix."""
    nodes = {n["node"] for n in answer["nodes"]}
    pools = {d["pool"] for p in answer["placements"] for d in p["devices"]}
    prefixes = {name[:2] for name in nodes | pools}
    assert len(prefixes) == 1, f"an answer mixing clusters: {sorted(nodes | pools)}"
    prefix = prefixes.pop()
    # A complete state of either cluster: every node has its GPUs and fits one.
    summary = answer["summary"]
    assert summary["nodesChecked"] == {"a-": 3, "b-": 2}[prefix], summary
    assert summary["nodesFit"] == summary["nodesChecked"], summary
    return prefix


@pytest.mark.django_db(transaction=True)
def test_no_answer_mixes_two_clusters_during_a_switch(switchable, api: APIClient) -> None:
    """Cluster A is replaced by cluster B at the same address while what-ifs run: each answer
    is all A or all B and says so; while B is being listed the answers come from A's last
    complete state marked `switching`; once B is listed they are B's, `live`."""
    servers, client_factory = switchable
    watchers = Watchers(client_factory)
    try:
        watchers.start(*KINDS, options=FAST)
        wait_for(lambda: cluster_freshness().state == "live", timeout=30)
        status, answer = ask(api)
        assert status == 200 and one_cluster(answer) == "a-"
        assert answer["cluster"]["uid"] == CLUSTER_A and answer["cluster"]["state"] == "live"

        port = servers[0].port
        servers[0].stop()
        second = FakeApiServer(
            port=port, cluster_uid=CLUSTER_B, bookmark_interval=0.3, too_large_wait=0.2
        )
        populate(second, "b-", 2)
        # B's slices come slowly (each list hangs past the read timeout a few times): its
        # nodes are listed first, and the tables hold B's nodes without their slices a while.
        second.inject_fault("hang", resource="resourceslices", times=3, hang_seconds=3.0)
        second.start()
        servers.append(second)

        seen: list[tuple[str, str, str]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status, answer = ask(api)
            assert status == 200, answer
            prefix = one_cluster(answer)
            label = answer["cluster"]
            assert label["state"] in ("live", "stale", "switching"), label
            # The answer names the cluster its nodes are of (A's last state while switching).
            assert PREFIX[label["uid"]] == prefix, (label, prefix)
            seen.append((label["state"], label["uid"], prefix))
            if label == {**label, "state": "live", "uid": CLUSTER_B}:
                break
            time.sleep(0.05)
        states = [s for s, _, _ in seen]
        assert ("live", CLUSTER_B, "b-") in seen, seen
        assert "switching" in states, f"the switch was never seen: {seen}"
        # A's last state while switching, then B's: never back.
        first_b = next(i for i, (_, uid, _) in enumerate(seen) if uid == CLUSTER_B)
        assert all(uid == CLUSTER_B for _, uid, _ in seen[first_b:]), seen
    finally:
        with contextlib.suppress(AssertionError):
            watchers.stop()


UID_A, UID_B = CLUSTER_A, CLUSTER_B


def _states(*, node_uid: str, slice_uid: str, slice_listed: bool = True) -> None:
    """Node on `node_uid` (heard from now), ResourceSlice on `slice_uid`: listed (heard from
    a little earlier, its watch failing: the old cluster went away) or dropped for the new
    cluster and being listed again."""
    now = timezone.now()
    earlier = now - timedelta(seconds=3)
    for kind, uid in (("Node", node_uid), ("ResourceSlice", slice_uid), ("DeviceClass", UID_A)):
        relisting = kind == "ResourceSlice" and not slice_listed
        old = kind != "Node" and uid != node_uid
        SyncState.objects.update_or_create(
            kind=kind,
            defaults={
                "served": True,
                "resource_version": "" if relisting else "10",
                "cursor_valid": not relisting,
                "cluster_uid": uid,
                "verified_at": earlier if old else now,
                "last_list_at": earlier if old else now,
                "heartbeat_at": earlier if old else now,
                "last_error": "ConnectionRefusedError: refused" if old else "",
                "watcher": f"w:{kind}",
            },
        )


def test_switching_with_no_complete_state_is_a_503_that_says_why(small, api: APIClient) -> None:
    """Nothing complete read yet and the tables hold two clusters: refuse, say why, retry."""
    _states(node_uid=UID_B, slice_uid=UID_A)
    response = api.post(URL, {"yaml": claim_yaml(count=1)}, format="json")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["field"] == "cluster"
    assert (
        f"the cluster behind the API server changed (kube-system uid {UID_B}, was {UID_A}); "
        "relisting" in body["detail"]
    )
    assert body["detail"].endswith("try again in a few seconds")
    assert body["cluster"]["state"] == "switching"


def test_switching_answers_from_the_last_complete_state(small, api: APIClient) -> None:
    """A state read while live is kept; once switching, answers come from it, marked so."""
    _states(node_uid=UID_A, slice_uid=UID_A)
    before = what_if(claim_yaml(count=1), use_cache=False)
    assert before["cluster"]["state"] == "live" and before["cluster"]["uid"] == UID_A
    # Cluster B's first node arrives with the Node kind switched, slices not yet relisted.
    Node.objects.filter(name=Node.objects.order_by("name").first().name).delete()
    load_objects([{**objects.node("b-node-0"), "metadata": {"name": "b-node-0", "uid": "b0"}}])
    _states(node_uid=UID_B, slice_uid=UID_B, slice_listed=False)
    response = api.post(URL, {"yaml": claim_yaml(count=1)}, format="json")
    assert response.status_code == 200
    answer = response.json()
    assert answer["cluster"] == {**before["cluster"], "state": "switching"}
    assert answer["fingerprint"] == before["fingerprint"]
    assert [n["node"] for n in answer["nodes"]] == [n["node"] for n in before["nodes"]]


def test_the_cluster_of_a_cached_answer_is_the_current_one(small) -> None:
    """An answer from the result cache carries the freshness of now, not of when it was made."""
    _states(node_uid=UID_A, slice_uid=UID_A)
    first = what_if(claim_yaml(count=1))
    SyncState.objects.filter(kind="Node").update(last_error="ConnectionRefusedError: refused")
    again = what_if(claim_yaml(count=1))
    assert again["cached"] and first["cluster"]["state"] == "live"
    assert again["cluster"]["state"] == "stale" and again["cluster"]["uid"] == UID_A
