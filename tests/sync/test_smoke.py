"""A first look: one kind syncs from the fake server and follows changes."""

from __future__ import annotations

import pytest

from tests.sync import objects
from tests.sync.conftest import wait_converged

pytestmark = pytest.mark.django_db(transaction=True)


def test_nodes_sync_and_follow(server, watchers) -> None:
    """Nodes listed at start and changed later end up in the database."""
    for i in range(5):
        server.apply(objects.node(f"n{i}"))
    watchers.start("Node")
    wait_converged(server, "Node")
    server.apply(objects.node("n9"))
    server.delete("Node", "n0")
    server.apply(objects.node("n1", ready=False))
    wait_converged(server, "Node")
