"""new_row: the bulk writers' model instances, made without Model.__init__, hold what it sets."""

from __future__ import annotations

import pytest

from claims.models import AllocatedDevice
from inventory.models import Device, Pool
from inventory.sync import new_row


def _fields(row: object) -> dict[str, object]:
    return {k: v for k, v in vars(row).items() if k != "_state"}


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (Device, {"slice_id": 3, "pool_id": 4, "name": "gpu-0", "driver": "gpu.example.com"}),
        (Device, {"pk": 9, "name": "gpu-1", "attributes": {"a": {"int": 1}}, "current": False}),
        (Pool, {"driver": "gpu.example.com", "name": "node-a"}),
        (AllocatedDevice, {"claim_id": 5, "driver": "d", "pool": "p", "device": "x"}),
    ],
)
def test_new_row_equals_the_model_constructor(model: type, values: dict) -> None:
    """Every column as Model(**values) has it (defaults included); the row is unsaved."""
    row = new_row(model, **values)
    expected = model(**values)
    assert _fields(row) == _fields(expected)
    assert row._state.adding and row._state.db is None
    assert row.pk == expected.pk


def test_new_row_refuses_an_unknown_column() -> None:
    """A misspelt column is an error, as Model(**values) makes it, not a silent attribute."""
    with pytest.raises(TypeError, match="Device has no column pool"):
        new_row(Device, pool=4)


def test_defaults_are_not_shared_between_rows() -> None:
    """Mutable defaults (a JSON column's dict) are fresh per row."""
    first, second = new_row(Device, name="a"), new_row(Device, name="b")
    assert first.attributes == {} and first.attributes is not second.attributes
