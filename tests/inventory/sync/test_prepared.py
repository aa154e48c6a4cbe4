"""Row values the bulk writers send are those Django's own field preparation gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from claims.models import AllocatedDevice
from inventory.models import Device, Node
from inventory.sync import new_row
from inventory.sync.core import _preparer


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
]


@pytest.mark.django_db
@pytest.mark.parametrize("row", ROWS, ids=["device", "device-defaults", "node", "allocated"])
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
