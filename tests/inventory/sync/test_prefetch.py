"""A relist's objects are read by a thread of its own while the writer writes: what it raises
reaches the writer, and nothing of a list that failed is stored."""

from __future__ import annotations

import threading

import pytest

from claims.models import ResourceClaim
from inventory.sync import apply_events, replace_all
from inventory.sync.batches import prefetched
from tests.inventory.sync.test_write import claim


class PageRefused(Exception):
    """Stands for an API server refusing a page mid-list (410 Gone)."""


@pytest.mark.django_db(transaction=True)
def test_a_list_that_fails_midway_stores_nothing_of_it(monkeypatch):
    """The reader's error is raised by replace_all after the objects before it were queued,
    and the relist's transaction leaves the stored objects as they were."""
    monkeypatch.setattr("inventory.sync.bulk.SEGMENT_SIZE", 5)
    apply_events("ResourceClaim", [("ADDED", claim("kept", rv="1"))])

    def pages():
        for i in range(30):
            yield claim(f"c{i}", rv="2"), None
        raise PageRefused("410: continue token expired")

    with pytest.raises(PageRefused):
        replace_all("ResourceClaim", pages())
    assert list(ResourceClaim.objects.values_list("name", flat=True)) == ["kept"]


def test_the_reader_runs_in_another_thread_and_stops_with_the_writer():
    """Objects are read (and normalized) off the writer's thread, in order; a writer that stops
    early stops the reader, which reads no further than its queue allows."""
    read_in: set[str] = set()
    read = [0]

    def source():
        for i in range(10_000):
            read_in.add(threading.current_thread().name)
            read[0] += 1
            yield claim(f"c{i}", rv="1"), None

    objects = prefetched(source())
    names = [next(objects)[1]["metadata"]["name"] for _ in range(3)]
    objects.close()
    assert names == ["c0", "c1", "c2"]
    assert threading.current_thread().name not in read_in
    from inventory.sync.batches import PREFETCH_OBJECTS

    assert read[0] <= 3 + PREFETCH_OBJECTS + 1
