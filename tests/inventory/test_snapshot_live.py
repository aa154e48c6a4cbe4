"""A snapshot import reaches open pages: recorded for the freshness, published after its commit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from dashboard import live
from inventory.freshness import SNAPSHOT, cluster_freshness
from inventory.models import SnapshotImport
from inventory.snapshot import SnapshotError, import_files, import_texts

FIXTURES = Path(__file__).parent / "fixtures" / "snapshot"

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, list[str]]]:
    """What publish_changes hands to the channel layer (after commits), one dict per send."""
    out: list[dict[str, list[str]]] = []

    def capture(changes: Mapping[str, Any]) -> None:
        out.append({topic: list(ids) for topic, ids in changes.items()})

    monkeypatch.setattr(live, "send_now", capture)
    return out


def test_an_import_publishes_every_changed_topic_once_coarsely(
    sent, django_capture_on_commit_callbacks
) -> None:
    """One send after the commit: `*` for each topic the import changed, and `sync`."""
    with django_capture_on_commit_callbacks(execute=True):
        import_files([FIXTURES / "small-cluster.yaml"])
    assert len(sent) == 1
    topics = sent[0]
    assert {"nodes", "classes", "slices", "pools", "devices", "claims", "sync"} <= set(topics)
    assert all(ids == ["*"] for ids in topics.values())


def test_a_merge_import_reaches_pages_too(sent, django_capture_on_commit_callbacks) -> None:
    """`--merge` publishes what it changed, and an unchanged merge at least the sync state."""
    import_files([FIXTURES / "small-cluster.yaml"])
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_snapshot", str(FIXTURES / "small-cluster.yaml"), "--merge")
    assert sent == [{"sync": ["*"]}]
    record = SnapshotImport.objects.order_by("-imported_at", "-pk").first()
    assert record is not None and record.merge
    assert record.stored["Node"] == 2


def test_the_import_is_recorded_and_the_cluster_is_a_snapshot() -> None:
    """No sync runs: the freshness says snapshot, as of the import."""
    import_files([FIXTURES / "small-cluster.yaml"])
    record = SnapshotImport.objects.get()
    fresh = cluster_freshness()
    assert (fresh.state, fresh.as_of, fresh.snapshot) == (SNAPSHOT, record.imported_at, record.pk)
    assert not record.merge


def test_a_refused_import_records_and_publishes_nothing(
    sent, django_capture_on_commit_callbacks
) -> None:
    """All or nothing, the record and the events included."""
    bad = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {}\n"
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(SnapshotError):
        import_texts([("bad.yaml", bad)])
    assert sent == [] and not SnapshotImport.objects.exists()


def test_only_the_last_imports_are_kept() -> None:
    """The history is bounded."""
    for _ in range(SnapshotImport.KEPT + 3):
        import_files([FIXTURES / "small-cluster.yaml"], merge=True)
    assert SnapshotImport.objects.count() == SnapshotImport.KEPT
