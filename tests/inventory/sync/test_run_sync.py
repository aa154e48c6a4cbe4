"""`manage.py run_sync` watches every kind in one process and stops on its own."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from inventory.models import SyncState
from inventory.sync.watch import write_guard
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import db_state, server_state


@pytest.mark.django_db(transaction=True)
def test_run_sync_syncs_all_kinds_for_a_duration(server, kubeconfig, settings) -> None:
    """A short run_sync stores nodes and claims and marks classic-only kinds as not served."""
    settings.KUBECONFIG = str(kubeconfig)
    settings.WATCH_TIMEOUT_SECONDS = 1
    server.apply(objects.node("n1"))
    server.apply(objects.resource_claim("ns", "c1"))
    call_command("run_sync", "--duration", "2.5")
    for kind in ("Node", "ResourceClaim"):
        assert db_state(kind) == server_state(server, kind)
    with write_guard():
        classic = SyncState.objects.get(kind="ResourceClass")
        node = SyncState.objects.get(kind="Node")
    assert not classic.served and "not served" in classic.not_served_reason
    assert classic.last_error == "" and not classic.is_stale()
    assert node.served and node.watcher == ""


def test_run_sync_rejects_unknown_kinds() -> None:
    """A misspelt kind is a clear error, not a silent no-op."""
    with pytest.raises(CommandError, match="unknown kinds"):
        call_command("run_sync", "--kinds", "Nodes")
