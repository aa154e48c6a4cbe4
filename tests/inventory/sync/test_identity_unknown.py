"""A server that no longer says which cluster it is must not be trusted with the stored cursor.

The issue's mix (30 old nodes + 3 new): a new cluster started at the address before its
kube-system namespace existed; the identity check read a 404, took "unknown" for "the same",
the new cluster's resourceVersions were past the cursor, and the watch from the cursor applied
the new cluster's objects over the old one's. Having known a uid, the watcher now waits, with an
error (the data is stale, not mixed), until the server says which cluster it is.
"""

from __future__ import annotations

import pytest

from dralib.kube.fakeapi import FakeApiServer
from inventory.freshness import cluster_freshness
from inventory.models import Node, SyncState
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def node_names() -> set[str]:
    return set(Node.objects.values_list("name", flat=True))


def test_a_new_cluster_without_kube_system_is_not_applied_over_the_old(server, watchers) -> None:
    """Old nodes stay alone (stale, with the reason) until the new cluster names itself; then
    the old ones are dropped and only the new ones are listed."""
    for i in range(3):
        server.apply(objects.node(f"old-{i}"))
    watchers.start("Node")
    wait_for(lambda: node_names() == {"old-0", "old-1", "old-2"})
    wait_for(lambda: cluster_freshness().state == "live")
    port = server.port
    server.stop()
    ahead = int(server.resource_version) + 500
    with FakeApiServer(
        port=port, first_revision=ahead, bookmark_interval=0.3, too_large_wait=0.2
    ) as new:
        new.delete("namespaces", name="kube-system")
        new.apply(objects.node("new-0"))
        wait_for(
            lambda: "no kube-system namespace" in SyncState.objects.get(kind="Node").last_error
        )
        assert node_names() == {"old-0", "old-1", "old-2"}
        fresh = cluster_freshness()
        assert fresh.state == "stale" and fresh.why.startswith("watch of Nodes failing")
        new.apply(
            {
                **objects.namespace("kube-system"),
                "metadata": {"name": "kube-system", "uid": new.cluster_uid},
            }
        )
        wait_for(lambda: node_names() == {"new-0"})
        wait_for(lambda: cluster_freshness().cluster_uid == new.cluster_uid)
        watchers.stop()
