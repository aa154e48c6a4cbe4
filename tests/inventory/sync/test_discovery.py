"""Discovery picks the newest served version; older clusters sync into the same v1 rows."""

from __future__ import annotations

import threading

import pytest

from dralib.kube.discovery import Discovery, discover
from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.kinds import DRA_GROUP, KINDS
from dralib.kube.normalize import normalize, to_version
from inventory.models import DeviceClass, ResourceSlice, SyncState
from inventory.sync.watch import run_kind, write_guard
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import wait_converged, wait_for


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        (("v1", "v1beta2", "v1beta1"), {"ResourceSlice": "v1", "DeviceTaintRule": "v1"}),
        (("v1beta2", "v1beta1"), {"ResourceSlice": "v1beta2", "DeviceTaintRule": "v1beta2"}),
        (("v1beta1", "v1alpha3"), {"ResourceSlice": "v1beta1", "DeviceTaintRule": "v1alpha3"}),
        (("v1alpha2",), {"ResourceSlice": "v1alpha2", "ResourceClass": "v1alpha2"}),
        (("v1",), {"ResourceClass": None, "PodSchedulingContext": None, "Node": "v1"}),
    ],
)
def test_newest_served_version_per_kind(client_factory, server, served, expected) -> None:
    """Each kind gets the newest version that serves it, or none."""
    server.set_served_versions(served)
    found = discover(client_factory())
    assert {kind: found[kind].version for kind in expected} == expected


def test_cluster_without_dra_is_reported(client_factory, server) -> None:
    """Without resource.k8s.io every DRA kind is not served, with a message saying so."""
    server.set_served_versions(())
    found = discover(client_factory())
    assert found["Pod"].served
    # PriorityClass and PodDisruptionBudget live in groups GA long before DRA.
    assert found["PriorityClass"].version == "v1" and found["PodDisruptionBudget"].served
    assert found["Event"].version == "v1"
    for kind, spec in KINDS.items():
        if spec.group == "resource.k8s.io":
            assert not found[kind].served
            assert "does not serve resource.k8s.io" in found[kind].message


@pytest.mark.django_db(transaction=True)
def test_no_dra_cluster_marks_sync_state_not_served(server, watchers) -> None:
    """The watcher of a DRA kind on a cluster without DRA reports it instead of erroring."""
    server.set_served_versions(())
    watchers.start("ResourceSlice", "Node")
    wait_for(lambda: SyncState.objects.filter(kind="ResourceSlice", served=False).exists())
    with write_guard():
        state = SyncState.objects.get(kind="ResourceSlice")
    assert "Dynamic Resource Allocation" in state.not_served_reason
    assert state.last_error == "" and state.health == "not-served"
    assert state.served_version == ""


@pytest.mark.django_db(transaction=True)
def test_v1beta1_cluster_syncs_into_v1_rows(watchers, client_factory) -> None:
    """Objects served as v1beta1 are stored normalized to v1, raw as sent."""
    from tests.inventory.sync.test_convergence import _factory_for

    with FakeApiServer(served_versions=("v1beta1",), bookmark_interval=0.3) as old:
        originals = [
            objects.device_class("gpu"),
            objects.resource_slice("n1-gpu", node_name="n1", devices=3),
        ]
        for number, obj in enumerate(originals):
            obj["metadata"]["uid"] = f"00000000-0000-0000-0000-00000000000{number}"
            old.apply(to_version(obj, "resource.k8s.io/v1beta1"))
        watchers.client_factory = _factory_for(old)
        watchers.start("ResourceSlice", "DeviceClass")
        wait_converged(old, "ResourceSlice", "DeviceClass")
        with write_guard():
            row = ResourceSlice.objects.get(name="n1-gpu")
            klass = DeviceClass.objects.get(name="gpu")
            state = SyncState.objects.get(kind="ResourceSlice")
            devices = sorted(row.devices.values_list("name", flat=True))
    assert state.served_version == "v1beta1"
    assert row.raw["apiVersion"] == "resource.k8s.io/v1beta1"
    assert row.obj["apiVersion"] == "resource.k8s.io/v1"
    assert row.obj["spec"] == normalize(originals[1])["spec"]
    assert klass.obj["spec"] == normalize(originals[0])["spec"]
    assert devices == ["gpu-0", "gpu-1", "gpu-2"]


def _discovery_reads(server: FakeApiServer) -> list[str]:
    """Paths of the discovery documents the server was asked for (group and version lists)."""
    return [
        r.path
        for r in server.requests
        if r.method == "GET" and r.path.startswith("/apis/") and r.path.count("/") <= 3
    ]


def test_shared_discovery_reads_each_document_once(client_factory, server) -> None:
    """Eight threads discovering every kind with one Discovery read each document once."""
    documents = Discovery()
    before = len(_discovery_reads(server))
    answers: list[dict[str, object]] = []

    def lookup() -> None:
        found = discover(client_factory(), documents=documents)
        answers.append({kind: served.version for kind, served in found.items()})

    threads = [threading.Thread(target=lookup) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    reads = _discovery_reads(server)[before:]
    assert len(answers) == 8 and all(answer == answers[0] for answer in answers)
    assert answers[0]["ResourceSlice"] == "v1" and answers[0]["Event"] == "v1"
    assert sorted(reads) == sorted(set(reads)) and len(reads) == documents.reads
    assert f"/apis/{DRA_GROUP}" in reads


def test_shared_discovery_keeps_a_404_until_invalidated(client_factory, server) -> None:
    """A cluster without DRA is read once; after invalidate the group served since is found."""
    documents = Discovery()
    server.set_served_versions(())
    client = client_factory()
    assert not discover(client, [KINDS["ResourceSlice"]], documents=documents)[
        "ResourceSlice"
    ].served
    server.set_served_versions(("v1",))
    kept = discover(client, [KINDS["ResourceSlice"]], documents=documents)["ResourceSlice"]
    assert not kept.served and documents.reads == 1
    documents.invalidate()
    assert (
        discover(client, [KINDS["ResourceSlice"]], documents=documents)["ResourceSlice"].version
        == "v1"
    )
    assert documents.reads == 3  # the group, then its v1 resource list


@pytest.mark.django_db(transaction=True)
def test_watchers_share_one_discovery_and_find_a_group_served_later(client_factory, server) -> None:
    """DRA watchers sharing a Discovery read the group once; one that found its kind not served
    reads again on its next poll and syncs the kind once it is served."""
    from tests.inventory.sync.conftest import FAST

    server.set_served_versions(())
    documents = Discovery()
    stops = {
        kind: threading.Event() for kind in ("ResourceSlice", "DeviceClass", "DeviceTaintRule")
    }
    before = len(_discovery_reads(server))
    threads = [
        threading.Thread(
            target=run_kind,
            kwargs={
                "kind": kind,
                "stop": stop,
                "options": FAST,
                "client_factory": client_factory,
                "lock_retry": 0.1,
                "lock_ttl": 5.0,
                "discovery": documents,
            },
            daemon=True,
        )
        for kind, stop in stops.items()
    ]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: SyncState.objects.filter(served=False).count() == 3)
        first = _discovery_reads(server)[before:]
        # Three watchers, one read of the group: the others took the kept 404.
        assert first.count(f"/apis/{DRA_GROUP}") == 1
        server.apply(objects.resource_slice("n1-gpu", node_name="n1", devices=2))
        server.set_served_versions(("v1",))
        wait_converged(server, "ResourceSlice")
        with write_guard():
            assert SyncState.objects.get(kind="ResourceSlice").served_version == "v1"
    finally:
        for stop in stops.values():
            stop.set()
        for thread in threads:
            thread.join(timeout=10)
