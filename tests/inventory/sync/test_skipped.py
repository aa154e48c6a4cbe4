"""A malformed object is skipped and recorded; the stream goes on; the stored good copy stays."""

from __future__ import annotations

import pytest

from inventory.models import ResourceSlice, SkippedObject, SyncState
from inventory.sync.watch import write_guard
from tests.inventory.sync import objects
from tests.inventory.sync.conftest import wait_converged, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_malformed_object_is_skipped_and_the_good_copy_kept(server, watchers) -> None:
    """A broken update of a stored slice is recorded, the slice after it arrives, the row stays."""
    good = server.apply(objects.resource_slice("node-a-gpu", node_name="node-a"))
    watchers.start("ResourceSlice")
    wait_converged(server, "ResourceSlice")
    server.apply(objects.broken_slice("node-a-gpu", node_name="node-a"))
    after = server.apply(objects.resource_slice("node-b-gpu", node_name="node-b"))

    def settled() -> bool:
        with write_guard():
            return ResourceSlice.objects.filter(uid=after["metadata"]["uid"]).exists()

    wait_for(settled)
    with write_guard():
        skipped = SkippedObject.objects.get(kind="ResourceSlice", name="node-a-gpu")
        kept = ResourceSlice.objects.get(name="node-a-gpu")
        state = SyncState.objects.get(kind="ResourceSlice")
        device_count = kept.devices.count()
    assert "spec.devices" in skipped.field or "devices" in skipped.error
    assert state.skipped == 1
    assert kept.resource_version == good["metadata"]["resourceVersion"]
    assert device_count == len(good["spec"]["devices"])


def test_malformed_object_in_a_list_is_skipped_too(server, watchers) -> None:
    """A relist meeting a malformed object records it and stores the rest."""
    server.apply(objects.broken_slice("bad", node_name="node-x"))
    server.apply(objects.resource_slice("fine", node_name="node-y"))
    watchers.start("ResourceSlice")

    def listed() -> bool:
        with write_guard():
            return (
                ResourceSlice.objects.filter(name="fine").exists()
                and SkippedObject.objects.filter(kind="ResourceSlice", name="bad").exists()
            )

    wait_for(listed)
    with write_guard():
        assert not ResourceSlice.objects.filter(name="bad").exists()
        assert SyncState.objects.get(kind="ResourceSlice").skipped == 1


def test_fixed_object_clears_its_skip_record(server, watchers) -> None:
    """When a skipped object is fixed upstream it is stored and its skip record removed."""
    server.apply(objects.broken_slice("flaky", node_name="node-z"))
    watchers.start("ResourceSlice")
    wait_for(lambda: SkippedObject.objects.filter(name="flaky").exists())
    server.apply(objects.resource_slice("flaky", node_name="node-z"))
    wait_converged(server, "ResourceSlice")
    wait_for(lambda: SyncState.objects.get(kind="ResourceSlice").skipped == 0)
    wait_for(lambda: not SkippedObject.objects.filter(name="flaky").exists())
