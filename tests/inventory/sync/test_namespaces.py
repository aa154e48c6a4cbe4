"""Namespaces sync like Nodes: listed, watched, labels stored, deletions applied."""

from __future__ import annotations

import pytest

from inventory.models import Namespace
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import wait_converged, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN = {"resource.kubernetes.io/admin-access": "true"}


def stored_labels() -> dict[str, dict[str, str]]:
    return dict(Namespace.objects.values_list("name", "labels"))


def test_namespaces_and_their_labels_are_synced(server, watchers) -> None:
    """Namespaces, kube-system included, reach the database with their labels, then follow
    label changes and deletions."""
    server.apply(objects.namespace("team-a"))
    server.apply(objects.namespace("dra-admin", labels=ADMIN))
    watchers.start("Namespace")
    wait_converged(server, "Namespace")
    labels = wait_for(stored_labels)
    assert set(labels) == {"kube-system", "team-a", "dra-admin"}
    assert labels["dra-admin"]["resource.kubernetes.io/admin-access"] == "true"
    assert "resource.kubernetes.io/admin-access" not in labels["team-a"]
    assert Namespace.objects.get(name="kube-system").uid == server.cluster_uid

    server.apply(objects.namespace("team-a", labels=ADMIN))
    server.delete("namespaces", name="dra-admin")
    wait_converged(server, "Namespace")
    labels = wait_for(lambda: "dra-admin" not in stored_labels() and stored_labels())
    assert labels["team-a"]["resource.kubernetes.io/admin-access"] == "true"
