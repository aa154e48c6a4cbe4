"""What a parsed device costs in memory: 100,000 of them stay resident in a web process."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from dralib.allocator.pools import SliceInfo
from dralib.allocator.types import ScenarioError

DEVICES = 128  # the most one slice may hold


def _slice(devices: list[dict]) -> dict:
    return {
        "metadata": {"name": "node-a-gpu"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-a",
            "devices": devices,
        },
    }


def test_a_parsed_device_costs_under_700_bytes() -> None:
    """Parsed and fully read (its lazy fields, capacity and counters), a device costs the
    allocator under 700 bytes beside its JSON (1,000 when every device had its own empty lists,
    message prefix and capacity dicts)."""
    raw = _slice(
        [
            {
                "name": f"gpu-{i}",
                "attributes": {"model": {"string": "a100"}},
                "capacity": {"memory": {"value": "40Gi"}},
            }
            for i in range(DEVICES)
        ]
    )
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        info = SliceInfo.parse(raw, index=0)
        for device in info.devices:
            assert not device.taints and not device.consumes_counters
            assert str(device.capacity["memory"].value) == "40Gi"
        gc.collect()
        per_device = (tracemalloc.get_traced_memory()[0] - before) / DEVICES
    finally:
        tracemalloc.stop()
    assert per_device < 700, f"{per_device:.0f} bytes a device"


def test_errors_still_name_the_device() -> None:
    """The device's place in messages is made when needed, and says which device it is."""
    info = SliceInfo.parse(
        _slice([{"name": "gpu-0"}, {"name": "gpu-1", "attributes": ["x"]}]), index=0
    )
    assert info.devices[1].where == "ResourceSlice node-a-gpu: spec.devices[1]"
    with pytest.raises(ScenarioError, match=r"spec.devices\[1\] \(gpu-1\): attributes"):
        assert info.devices[1].taints is None
    with pytest.raises(ScenarioError, match=r"spec.devices\[1\]: expected a device with a name"):
        SliceInfo.parse(_slice([{"name": "gpu-0"}, {"nameless": True}]), index=0)
