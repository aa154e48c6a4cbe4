"""Row values the bulk writers send are those Django's own field preparation gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.db import connection
from django.db.models import DateTimeField
from django.utils import timezone

from claims.models import AllocatedDevice
from inventory.models import Device, Node
from inventory.sync import new_row
from inventory.sync.core import _preparer, insert_rows


def _comparable(value: object) -> object:
    if hasattr(value, "obj"):  # psycopg's Jsonb
        return ("json", value.obj)
    if isinstance(value, str) and value[:1] in ("{", "["):
        return ("json", json.loads(value))
    return value


ROWS = [
    new_row(
        Device,
        slice_id=1,
        pool_id=2,
        name="gpu-0",
        driver="gpu.example.com",
        pool_name="node-a",
        node_name="node-a",
        all_nodes=False,
        node_selector=None,
        attributes={"model": {"string": "h100"}, "n": {"int": 2**70}},
        capacity={"memory": {"value": "80Gi"}},
        tainted=True,
        spec={"name": "gpu-0"},
    ),
    new_row(Device, slice_id=1, pool_id=2, name="", node_name="", current=0),
    new_row(
        Node,
        uid="u-1",
        name="node-a",
        raw={"kind": "Node"},
        obj={"kind": "Node", "metadata": {"labels": {"a": "ü"}}},
        resource_version="12",
        synced_at=datetime(2026, 11, 25, tzinfo=UTC),
    ),
    new_row(AllocatedDevice, claim_id=7, request="r", driver="d", pool="p", device="x"),
    new_row(Node, uid="u-2", name="node-b", raw={}, obj={}, labels={}, resource_version="1"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "row", ROWS, ids=["device", "device-defaults", "node", "allocated", "node-empty"]
)
def test_prepared_values_equal_djangos(row: object) -> None:
    """Each column's value equals get_db_prep_save's (JSON compared as the JSON it holds)."""
    columns = [f for f in type(row)._meta.concrete_fields if not f.primary_key]
    values = [column.pre_save(row, True) for column in columns]
    ours = _preparer(columns, connection)(values)
    django = [
        column.get_db_prep_save(v, connection) for column, v in zip(columns, values, strict=True)
    ]
    assert [_comparable(v) for v in ours] == [_comparable(v) for v in django]
    assert [type(v) for v in ours if not hasattr(v, "obj")] == [
        type(v) for v in django if not hasattr(v, "obj")
    ]


@pytest.mark.django_db
def test_inserted_rows_hold_what_pre_save_gives() -> None:
    """insert_rows stores what pre_save gives each column: one auto_now moment for the write,
    set on every row, and each row's own creation time (a shared timestamp prepared once)."""
    shared = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    created = [shared, shared, datetime(2025, 5, 6, tzinfo=UTC), None]
    rows = [
        new_row(
            Node,
            uid=f"u-{index}",
            name=f"node-{index}",
            raw={"n": index},
            obj={"n": index},
            resource_version=str(index),
            created_at=when,
            synced_at=datetime(2000, 1, 1, tzinfo=UTC),
        )
        for index, when in enumerate(created)
    ]
    before = timezone.now()
    insert_rows(Node, rows, returning=("uid",))
    after = timezone.now()
    stamps = {row.synced_at for row in rows}
    assert len(stamps) == 1
    (stamp,) = stamps
    assert before <= stamp <= after
    stored = dict(Node.objects.values_list("uid", "synced_at"))
    assert stored == {row.uid: stamp for row in rows}
    assert [Node.objects.get(pk=row.pk).created_at for row in rows] == created
    assert [Node.objects.get(pk=row.pk).obj for row in rows] == [{"n": i} for i in range(4)]


@pytest.mark.django_db
def test_equal_timestamps_are_prepared_once_on_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects made together share a creationTimestamp: on SQLite each distinct instant is
    prepared once per write (Django's conversion ran for every row), stored as Django stores it."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL takes datetimes as they are")
    prepared: list[object] = []
    prepare = DateTimeField.get_db_prep_save

    def counted(self: DateTimeField, value: object, connection: object) -> object:
        prepared.append(value)
        return prepare(self, value, connection)

    monkeypatch.setattr(DateTimeField, "get_db_prep_save", counted)
    # The same instant written in UTC and in UTC+1, each row its own datetime object.
    made = [
        datetime(2026, 1, 2, 8, 0, tzinfo=UTC)
        if index % 2
        else datetime(2026, 1, 2, 9, 0, tzinfo=dt_timezone(timedelta(hours=1)))
        for index in range(100)
    ]
    made[7] = datetime(2025, 5, 6, tzinfo=UTC)
    rows = [
        new_row(Node, uid=f"u-{i}", name=f"n-{i}", raw={}, obj={}, created_at=when)
        for i, when in enumerate(made)
    ]
    insert_rows(Node, rows, returning=("uid",))
    # synced_at's moment, the shared instant (first seen in UTC+1), and node 7's.
    assert len(prepared) == 3
    stored = dict(Node.objects.values_list("name", "created_at"))
    assert stored == {f"n-{i}": when for i, when in enumerate(made)}
