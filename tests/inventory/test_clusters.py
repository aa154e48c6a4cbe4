"""Clusters as a dimension of every synced row (issue #27, step 1): scope, uniqueness, removal."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from claims.models import Pod
from dashboard import scope
from inventory.clusters import cluster_id, in_cluster
from inventory.models import Cluster, Node
from inventory.planner import seed_sqlite_statistics
from inventory.sync import upsert_events


def _node(name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": uid}}


def _pod(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }


def _outside_any_scope(work: Any) -> Any:
    """`work()` run in an empty context: no scope in force, as in a thread nobody scoped."""
    return contextvars.Context().run(work)


@pytest.mark.django_db
def test_a_read_outside_a_scope_raises_instead_of_reading_every_cluster() -> None:
    Node.objects.create(name="n1", uid="u1", api_version="v1", raw={}, obj={})
    with pytest.raises(scope.ScopeUnset):
        _outside_any_scope(lambda: list(Node.objects.all()))
    with pytest.raises(scope.ScopeUnset):
        _outside_any_scope(lambda: Node.objects.count())
    # A queryset made outside a scope reads the scope it is evaluated in.
    made_outside = _outside_any_scope(lambda: Node.objects.filter(name="n1"))
    assert [node.name for node in made_outside] == ["n1"]
    # Fleet-wide reads say so.
    assert _outside_any_scope(lambda: Node.all_clusters.count()) == 1


@pytest.mark.django_db
def test_an_unsaved_row_made_outside_a_scope_cannot_be_saved() -> None:
    node = _outside_any_scope(lambda: Node(name="n1", uid="u1", api_version="v1", raw={}, obj={}))
    assert node.cluster_id is None
    with pytest.raises(IntegrityError), transaction.atomic():
        node.save()


@pytest.mark.django_db
def test_two_clusters_keep_objects_of_the_same_names_apart() -> None:
    """Same node and pod names and uids in two clusters: each scope reads and writes its own."""
    Cluster.objects.create(name="east")
    for name in ("default", "east"):
        with in_cluster(name):
            upsert_events("Node", [(_node("gpu-1", "uid-node"), None)], publish=False)
            upsert_events("Pod", [(_pod("team-a", "trainer", "uid-pod"), None)], publish=False)
    assert Node.all_clusters.count() == 2 and Pod.all_clusters.count() == 2
    with in_cluster("east"):
        east = list(Node.objects.values_list("cluster_id", "name"))
        node = _node("gpu-1", "uid-node")
        node["metadata"]["labels"] = {"zone": "east"}
        upsert_events("Node", [(node, None)], publish=False)
    assert east == [(cluster_id("east"), "gpu-1")]
    # The default cluster's node is untouched by the east cluster's update.
    assert Node.objects.get().labels == {}
    with in_cluster("east"):
        assert Node.objects.get().labels == {"zone": "east"}
    # Within one cluster the names stay unique.
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(name="gpu-1", uid="other", api_version="v1", raw={}, obj={})


@pytest.mark.django_db
def test_removing_a_cluster_removes_its_rows_and_only_those() -> None:
    east = Cluster.objects.create(name="east")
    with in_cluster("east"):
        upsert_events("Node", [(_node("gpu-1", "uid-east"), None)], publish=False)
    upsert_events("Node", [(_node("gpu-1", "uid-default"), None)], publish=False)
    east.delete()
    assert list(Node.all_clusters.values_list("uid", flat=True)) == ["uid-default"]


@pytest.mark.django_db
def test_sqlite_is_told_the_cluster_column_narrows_nothing() -> None:
    if connection.vendor != "sqlite":
        assert seed_sqlite_statistics() == 0
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'pod_node_idx'")
        assert cursor.fetchall() == [("1000000 1000000 10",)]
        # What ANALYZE (or an operator) wrote is kept.
        cursor.execute("UPDATE sqlite_stat1 SET stat = '5 5 1' WHERE idx = 'pod_node_idx'")
    seed_sqlite_statistics()
    with connection.cursor() as cursor:
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'pod_node_idx'")
        assert cursor.fetchall() == [("5 5 1",)]
