"""The Event table's TTL without an index on `last_seen` (issue #25 ingest): a written event past
the TTL goes with its batch, the table is swept at most every EVENTS_SWEEP_SECONDS, and on
PostgreSQL a count bump is a HOT update (no index rewritten)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from claims.events import EVENTS_SWEEP_SECONDS, SWEEPS
from claims.models import Event
from inventory.sync import apply_events
from tests.inventory.sync.test_kube_events import _stamp, event

pytestmark = pytest.mark.django_db


def _events(*objs: dict[str, Any], first: int = 0) -> list[tuple[str, dict[str, Any]]]:
    for index, obj in enumerate(objs, start=first):
        obj["metadata"].update(uid=f"uid-{obj['metadata']['name']}", resourceVersion=str(index))
    return [("ADDED", obj) for obj in objs]


def _sweeps(queries: CaptureQueriesContext) -> int:
    """Statements that read the whole table by last_seen (the sweep)."""
    return sum('"claims_event"."last_seen" <' in query["sql"] for query in queries)


def test_a_written_event_past_the_ttl_goes_with_its_batch(settings) -> None:
    settings.EVENTS_TTL_SECONDS = 3600
    now = datetime.now(UTC)
    apply_events("Event", _events(event("fresh", kind="Pod", about="p", reason="R", at=now)))
    assert SWEEPS.last is not None  # the first batch of a process swept
    old = event("old", kind="Pod", about="p", reason="R", at=now - timedelta(hours=2))
    young = event("young", kind="Pod", about="p", reason="R", at=now)
    with CaptureQueriesContext(connection) as queries:
        apply_events("Event", _events(old, young, first=1), publish=False)
    assert _sweeps(queries) == 0
    assert set(Event.objects.values_list("name", flat=True)) == {"fresh", "young"}


def test_stored_events_that_expire_go_with_the_next_sweep(settings) -> None:
    settings.EVENTS_TTL_SECONDS = 3600
    now = datetime.now(UTC)
    aging = event("aging", kind="Pod", about="p", reason="R", at=now - timedelta(minutes=59))
    apply_events("Event", _events(aging), publish=False)
    assert Event.objects.count() == 1
    # A minute later "aging" is past the TTL: a batch between two sweeps leaves it for the
    # sweep, which runs once EVENTS_SWEEP_SECONDS have passed since the last one.
    settings.EVENTS_TTL_SECONDS = 3000
    other = event("other", kind="Pod", about="q", reason="R", at=now)
    with CaptureQueriesContext(connection) as queries:
        apply_events("Event", _events(other, first=1), publish=False)
    assert _sweeps(queries) == 0
    assert set(Event.objects.values_list("name", flat=True)) == {"aging", "other"}
    assert SWEEPS.last is not None
    SWEEPS.last -= EVENTS_SWEEP_SECONDS
    again = event("again", kind="Pod", about="q", reason="R", at=now)
    with CaptureQueriesContext(connection) as queries:
        apply_events("Event", _events(again, first=2), publish=False)
    assert _sweeps(queries) == 1
    assert set(Event.objects.values_list("name", flat=True)) == {"other", "again"}


def test_a_naive_time_is_left_to_the_sweep(settings) -> None:
    """A timestamp without a zone cannot be compared with the cutoff: stored, not refused."""
    apply_events(
        "Event", _events(event("a", kind="Pod", about="p", reason="R", at=datetime.now(UTC)))
    )
    naive = event("naive", kind="Pod", about="p", reason="R", at=datetime.now(UTC))
    naive["eventTime"] = "2020-01-01T00:00:00"
    apply_events("Event", _events(naive, first=1), publish=False)
    assert set(Event.objects.values_list("name", flat=True)) == {"a", "naive"}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="HOT updates are PostgreSQL's")
def test_a_count_bump_rewrites_no_index() -> None:
    """Updates of count, times, raw and obj change no indexed column: PostgreSQL writes them as
    heap-only tuples where the page has room (the table's own statistics of this transaction
    say how many)."""
    now = datetime.now(UTC)
    objs = [event(f"e.{i}", kind="Pod", about=f"p{i}", reason="R", at=now) for i in range(60)]
    apply_events("Event", _events(*objs), publish=False)
    bumped = []
    for index, obj in enumerate(objs):
        obj = dict(obj, series={"count": 2, "lastObservedTime": _stamp(now)})
        obj["metadata"] = dict(obj["metadata"], resourceVersion=str(100 + index))
        bumped.append(("MODIFIED", obj))
    with transaction.atomic():
        apply_events("Event", bumped, publish=False)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                "WHERE relname = 'claims_event'"
            )
            updated, hot = cursor.fetchone()
    assert updated == 60
    assert set(Event.objects.values_list("count", flat=True)) == {2}
    # Pages are filled to half (the table's fillfactor): three of these rows share a page, with
    # room for two new versions beside them; the third goes to another page. Without the
    # fillfactor, pages COPY filled had little room, and with an index on last_seen none was HOT.
    assert hot >= updated * 2 // 3
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'claims_event'")
        assert cursor.fetchone()[0] == ["fillfactor=50"]
