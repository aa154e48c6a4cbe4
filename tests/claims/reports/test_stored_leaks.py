"""Leaks kept across restarts: a new process at the same table versions takes them as read."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from claims.leaks import find_leaks, forget_leaks, warm_leaks
from claims.models import KeptMembership, ResourceClaim
from tests.claims.reports.test_leaks import NOW, leaky  # noqa: F401 - the fixture

CLAIMS = connection.ops.quote_name(ResourceClaim._meta.db_table)


def _read_claims(queries: CaptureQueriesContext) -> int:
    return sum(1 for query in queries if f"FROM {CLAIMS}" in query["sql"])


def _as_read(leaks: list[Any]) -> list[dict[str, Any]]:
    return [leak.as_dict(NOW) for leak in leaks]


@pytest.mark.django_db(transaction=True)
def test_a_new_process_takes_the_stored_leaks_until_a_table_moves(leaky) -> None:  # noqa: F811
    """The warm-up stores the leaks it read; a new process (nothing kept in memory) at the same
    versions reads no claim and finds the same leaks; after a write it reads them again."""
    first = _as_read(find_leaks(now=NOW))
    assert first
    assert not KeptMembership.objects.filter(name="leaks").exists()  # pages write nothing
    forget_leaks()
    warm_leaks()
    assert KeptMembership.objects.filter(name="leaks").exists()
    forget_leaks()
    with CaptureQueriesContext(connection) as queries:
        again = _as_read(find_leaks(now=NOW))
    assert again == first
    assert _read_claims(queries) == 0
    ResourceClaim.objects.filter(name="forgotten").delete()
    forget_leaks()
    with CaptureQueriesContext(connection) as queries:
        after = _as_read(find_leaks(now=NOW))
    assert _read_claims(queries) > 0
    assert [leak for leak in first if leak["claim"] != "forgotten"] == after


@pytest.mark.django_db(transaction=True)
def test_leaks_read_over_a_transactions_own_writes_are_not_stored(leaky) -> None:  # noqa: F811
    """Inside a transaction that wrote a table (PostgreSQL counts it at commit), what it reads
    is its own: nothing is stored for the next process."""
    KeptMembership.objects.filter(name="leaks").delete()
    with transaction.atomic():
        ResourceClaim.objects.filter(name="healthy").update(request_count=3)
        warm_leaks()
        stored = KeptMembership.objects.filter(name="leaks").exists()
    assert stored == (connection.vendor == "sqlite")  # SQLite's versions move as rows are written
