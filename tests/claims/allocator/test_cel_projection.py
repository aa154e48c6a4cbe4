"""Selectors evaluated once per part of the device they read give the full evaluation's answers."""

from __future__ import annotations

import pytest

from claims.allocator.cel import CELError, CELOptions, DeviceInput, compile_selector
from claims.allocator.cel.projection import projection_of

GPU = "gpu.example.com"

DEVICES = [
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu"}, "uuid": {"string": "a"}}),
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu"}, "uuid": {"string": "b"}}),
    DeviceInput(driver=GPU, attributes={"type": {"string": "mig"}, "index": {"int": 1}}),
    DeviceInput(driver=GPU, attributes={"index": {"int": 1}}),
    DeviceInput(driver=GPU, attributes={"index": {"bool": True}}),
    DeviceInput(driver=GPU, attributes={"other.example.com/type": {"string": "gpu"}}),
    DeviceInput(driver="nic.example.com", attributes={"type": {"string": "gpu"}}),
    DeviceInput(driver=GPU, attributes={"driverVersion": {"version": "1.2.3"}}),
    DeviceInput(driver=GPU, attributes={"models": {"strings": ["a100", "h100"]}}),
    DeviceInput(driver=GPU, attributes={}, capacity={"memory": {"value": "80Gi"}}),
]

EXPRESSIONS = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].type == "gpu"',
    'device.attributes["gpu.example.com"]["type"] == "mig"',
    'device.attributes["gpu.example.com"].index == 1',
    'has(device.attributes["gpu.example.com"].type)',
    'device.attributes["other.example.com"].type == "gpu"',
    'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))',
    '"h100" in device.attributes["gpu.example.com"].models',
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].uuid == "b"',
    # Not projected: they read more than named attributes.
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.attributes["gpu.example.com"].exists(k, k == "index")',
    'device.attributes["gpu.example.com"].size() > 1',
    '"device" == "device" && device.driver != ""',
]


def _outcome(selector, device: DeviceInput) -> object:
    try:
        return selector.matches(device)
    except CELError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_projected_answers_equal_full_answers(expression: str) -> None:
    """Every device gets the same answer (or the same error) as a full evaluation gives it."""
    options = CELOptions()
    projected = compile_selector(expression, options=options)
    full = compile_selector(expression, options=options)
    full = type(full)(
        expression=expression,
        options=options,
        env=full._env,
        program=full._program,
        cost=full.cost,
    )
    full._projection = None
    for _ in range(2):  # the second round answers from the projected results
        for device in DEVICES:
            assert _outcome(projected, device) == _outcome(full, device), device


def test_what_is_projected() -> None:
    """Named attributes and the driver are projected; other reads of the device are not."""
    assert projection_of('device.driver == "x"').attributes == ()
    assert projection_of(
        'device.attributes["d"].a == 1 && device.attributes["d"]["b"]'
    ).attributes == (
        ("d", "a"),
        ("d", "b"),
    )
    for expression in (
        'device.capacity["d"].memory.isGreaterThan(quantity("1"))',
        'device.attributes["d"].exists(k, k == "a")',
        'device.attributes["d"].size() == 1',
        "device.allowMultipleAllocations",
        'device.attributes.exists(d, d == "x")',
        '"device" != ""',
        'device.attributes["d\\"x"].a == 1',
    ):
        assert projection_of(expression) is None, expression


def test_devices_alike_in_the_read_part_share_one_evaluation() -> None:
    """Devices differing only in unread attributes are evaluated once."""
    selector = compile_selector('device.attributes["gpu.example.com"].type == "gpu"')
    before = len(selector._projected)
    for index in range(50):
        device = DeviceInput(
            driver=GPU,
            attributes={"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{index}"}},
        )
        assert selector.matches(device) is True
    assert len(selector._projected) - before <= 1
