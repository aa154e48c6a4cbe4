"""Raw input over upstream's API limits is refused with the API server's kind of message."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from dralib.allocator import allocate_scenario
from dralib.allocator.limits import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    DEVICE_REQUESTS_MAX_SIZE,
    FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE,
    RESOURCE_SLICE_MAX_DEVICES,
    RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES,
)

EXACT = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}


def _scenario() -> dict[str, Any]:
    return {
        "node": {"metadata": {"name": "node-1"}},
        "classes": [{"metadata": {"name": "gpu"}, "spec": {}}],
        "slices": [
            {
                "metadata": {"name": "slice"},
                "spec": {
                    "driver": "gpu.example.com",
                    "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "node-1",
                    "devices": [{"name": "gpu-0"}],
                },
            }
        ],
        "claims": [
            {
                "metadata": {"name": "claim-0", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": dict(EXACT)}]}},
            }
        ],
    }


def _devices(s: dict[str, Any]) -> dict[str, Any]:
    devices: dict[str, Any] = s["claims"][0]["spec"]["devices"]
    return devices


def _slice_devices(s: dict[str, Any], count: int, **fields: Any) -> None:
    s["slices"][0]["spec"]["devices"] = [{"name": f"gpu-{i}", **fields} for i in range(count)]


def _many_requests(s: dict[str, Any], count: int) -> None:
    _devices(s)["requests"] = [{"name": f"r{i}", "exactly": dict(EXACT)} for i in range(count)]


def _subrequests(s: dict[str, Any], count: int) -> None:
    subs = [{"name": f"s{i}", **EXACT} for i in range(count)]
    _devices(s)["requests"] = [{"name": "r", "firstAvailable": subs}]


def _selectors(count: int) -> list[dict[str, Any]]:
    return [{"cel": {"expression": "true"}} for _ in range(count)]


def _long_expression(length: int) -> list[dict[str, Any]]:
    expression = "true" + " " * (length - len("true"))
    return [{"cel": {"expression": expression}}]


def _attributes(count: int) -> dict[str, Any]:
    return {f"a{i}": {"int": i} for i in range(count)}


OVER: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "requests",
        lambda s: _many_requests(s, DEVICE_REQUESTS_MAX_SIZE + 1),
        "spec.devices.requests: Too many: 33: must have at most 32 items",
    ),
    (
        "firstAvailable",
        lambda s: _subrequests(s, FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE + 1),
        "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items",
    ),
    (
        "request selectors",
        lambda s: _devices(s)["requests"][0]["exactly"].update(selectors=_selectors(33)),
        "spec.devices.requests[0].exactly.selectors: Too many: 33",
    ),
    (
        "tolerations",
        lambda s: _devices(s)["requests"][0]["exactly"].update(
            tolerations=[{"operator": "Exists"}] * 17
        ),
        "spec.devices.requests[0].exactly.tolerations: Too many: 17: must have at most 16",
    ),
    (
        "constraints",
        lambda s: _devices(s).update(constraints=[{"matchAttribute": "x/y"}] * 33),
        "spec.devices.constraints: Too many: 33",
    ),
    (
        "claim config",
        lambda s: _devices(s).update(config=[{"opaque": {"driver": "d", "parameters": {}}}] * 33),
        "spec.devices.config: Too many: 33",
    ),
    (
        "CEL expression length",
        lambda s: _devices(s)["requests"][0]["exactly"].update(
            selectors=_long_expression(CEL_SELECTOR_EXPRESSION_MAX_LENGTH + 1)
        ),
        "selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
    ),
    (
        "class selectors",
        lambda s: s["classes"][0]["spec"].update(selectors=_selectors(33)),
        "DeviceClass gpu: spec.selectors: Too many: 33",
    ),
    (
        "class config",
        lambda s: s["classes"][0]["spec"].update(
            config=[{"opaque": {"driver": "d", "parameters": {}}}] * 33
        ),
        "DeviceClass gpu: spec.config: Too many: 33",
    ),
    (
        "devices per slice",
        lambda s: _slice_devices(s, RESOURCE_SLICE_MAX_DEVICES + 1),
        "ResourceSlice slice: spec.devices: Too many: 129: must have at most 128 items",
    ),
    (
        "devices per slice with taints",
        lambda s: _slice_devices(
            s,
            RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES + 1,
            taints=[{"key": "k", "effect": "NoSchedule"}],
        ),
        "spec.devices: Too many: 65: must have at most 64 items",
    ),
    (
        "attributes and capacities",
        lambda s: _slice_devices(
            s, 1, attributes=_attributes(20), capacity={f"c{i}": {"value": "1"} for i in range(13)}
        ),
        "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities "
        "must not exceed 32",
    ),
    (
        "counter consumptions",
        lambda s: _slice_devices(
            s, 1, consumesCounters=[{"counterSet": f"s{i}", "counters": {}} for i in range(3)]
        ),
        "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"), [(c, m) for _, c, m in OVER], ids=[n for n, _, _ in OVER]
)
def test_input_over_a_limit_is_an_error(
    change: Callable[[dict[str, Any]], None], message: str
) -> None:
    """One item over the limit gives an error naming the field, count and limit."""
    scenario = _scenario()
    change(scenario)
    output = allocate_scenario(scenario)
    assert output["results"] is None
    assert message in output["error"]


AT_LIMIT: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("requests", lambda s: _many_requests(s, DEVICE_REQUESTS_MAX_SIZE)),
    ("firstAvailable", lambda s: _subrequests(s, FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE)),
    ("devices per slice", lambda s: _slice_devices(s, RESOURCE_SLICE_MAX_DEVICES)),
    (
        "CEL expression length",
        lambda s: _devices(s)["requests"][0]["exactly"].update(
            selectors=_long_expression(CEL_SELECTOR_EXPRESSION_MAX_LENGTH)
        ),
    ),
]


@pytest.mark.parametrize("change", [c for _, c in AT_LIMIT], ids=[n for n, _ in AT_LIMIT])
def test_input_at_a_limit_is_allocated(change: Callable[[dict[str, Any]], None]) -> None:
    """Exactly at the limit is accepted: the search runs and answers without an error."""
    scenario = copy.deepcopy(_scenario())
    change(scenario)
    output = allocate_scenario(scenario)
    assert output["error"] == ""
