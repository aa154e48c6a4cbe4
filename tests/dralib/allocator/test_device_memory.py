"""What a parsed device costs in memory: 100,000 of them stay resident in a web process."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from dralib.allocator import selection
from dralib.allocator.selection import SelectorCache
from dralib.allocator.slices import SliceInfo
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


def test_selector_inputs_are_kept_for_a_few_devices_only(monkeypatch) -> None:
    """A selector that reads capacity (not answered from projected attributes) is evaluated per
    device content: every result is kept, the converted inputs only for the last few devices,
    so their bytes stop growing with the devices checked (2 KB a device when all were kept)."""
    monkeypatch.setattr(selection, "INPUTS_KEPT", 64)
    devices = [
        device
        for n in range(8)
        for device in SliceInfo.parse(
            _slice(
                [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"uuid": {"string": f"GPU-{n}-{i}"}},
                        "capacity": {"memory": {"value": f"{i + 1}Gi"}},
                    }
                    for i in range(DEVICES)
                ]
            ),
            index=n,
        ).devices
    ]
    for device in devices:  # the devices' own lazy fields are not the cache's
        assert device.content_key and device.plain_domains is not False and not device.taints
    wanted = ('device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0',)
    cache = SelectorCache()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fits = [cache.select((), wanted, device) for device in devices[:256]]
        gc.collect()
        first = tracemalloc.get_traced_memory()[0] - before
        fits += [cache.select((), wanted, device) for device in devices[256:]]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before - first
    finally:
        tracemalloc.stop()
    assert fits.count(True) == 8 * (DEVICES - 63)
    assert cache.evaluations == len(devices) and len(cache._inputs) <= 64
    # The next 768 devices added their results (930 bytes each), no inputs (2.8 KB with them).
    assert grown / (len(devices) - 256) < 1500, f"{grown / (len(devices) - 256):.0f} bytes a device"


def test_one_consumption_object_is_parsed_once() -> None:
    """Devices sharing one `consumesCounters` object (equal ones read from the database are)
    share its parsed form; an equal copy parses to an equal value of its own."""
    consumption = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}]
    copied = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}]
    devices = [
        {"name": "mig-a", "consumesCounters": consumption},
        {"name": "mig-b", "consumesCounters": consumption},
        {"name": "mig-c", "consumesCounters": copied},
    ]
    first, second, third = SliceInfo.parse(_slice(devices), index=0).devices
    assert first.consumes_counters is second.consumes_counters
    assert third.consumes_counters is not first.consumes_counters
    assert third.consumes_counters == first.consumes_counters
    ((set_name, counters),) = first.consumes_counters
    assert set_name == "gpu-0" and str(counters["memory"]) == "10Gi"
