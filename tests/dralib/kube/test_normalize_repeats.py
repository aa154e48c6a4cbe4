"""What repeats across a snapshot's objects (quantities, label keys) is checked once, refused
as before."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dralib.kube.normalize import NormalizeError, names, normalize, schema

V1 = "resource.k8s.io/v1"


class _CountingPattern:
    """`_QUANTITY`, counting the strings it is asked to match."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.matched: list[str] = []

    def match(self, value: str) -> re.Match[str] | None:
        self.matched.append(value)
        return self.pattern.match(value)


@pytest.fixture
def quantities(monkeypatch: pytest.MonkeyPatch) -> _CountingPattern:
    counting = _CountingPattern(schema._QUANTITY)
    monkeypatch.setattr(schema, "_QUANTITY", counting)
    monkeypatch.setattr(schema, "_QUANTITIES_SEEN", set())
    return counting


def _slice(name: str, memory: str, devices: int = 20) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": f"u-{name}", "labels": {"example.com/rack": "r1"}},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "nodeName": name,
            "devices": [
                {"name": f"gpu-{i}", "capacity": {"memory": {"value": memory}}}
                for i in range(devices)
            ],
        },
    }


def test_a_quantity_repeated_across_devices_and_slices_is_matched_once(
    quantities: _CountingPattern,
) -> None:
    """100 devices in 5 slices all holding 80Gi: one match of the quantity pattern."""
    for index in range(5):
        obj = normalize(_slice(f"node-{index}", "80Gi"), validate=True)
        assert obj["spec"]["devices"][19]["capacity"]["memory"] == {"value": "80Gi"}
    assert quantities.matched == ["80Gi"]


def test_a_bad_quantity_is_refused_every_time(quantities: _CountingPattern) -> None:
    """A string that is no quantity is never taken as seen: each object naming it is refused."""
    for _ in range(2):
        with pytest.raises(NormalizeError, match=r"spec\.devices\[0\]\.capacity\[memory\]"):
            normalize(_slice("node-1", "12Zi", devices=1), validate=True)
    assert quantities.matched.count("12Zi") >= 2


def test_the_memory_of_quantities_is_bounded(quantities: _CountingPattern) -> None:
    """Past its bound new quantities are matched each time, not kept."""
    for value in range(schema._QUANTITIES_KEPT + 10):
        assert schema.QUANTITY.fits_all(str(value))
    assert len(schema._QUANTITIES_SEEN) == schema._QUANTITIES_KEPT
    assert schema.QUANTITY.fits_all(str(schema._QUANTITIES_KEPT + 5))
    assert len(quantities.matched) == schema._QUANTITIES_KEPT + 11


def test_a_label_key_is_checked_once_and_a_bad_one_still_refused() -> None:
    """Label keys repeat in every object: the check's answer is remembered; a bad key is named."""
    names.qualified_name.cache_clear()
    for index in range(5):
        normalize(_slice(f"node-{index}", "1", devices=1), validate=True)
    assert names.qualified_name.cache_info().misses == 1
    bad = _slice("node-9", "1", devices=1)
    bad["metadata"]["labels"] = {"-bad/": "x"}
    with pytest.raises(NormalizeError, match=r"metadata\.labels"):
        normalize(bad, validate=True)
