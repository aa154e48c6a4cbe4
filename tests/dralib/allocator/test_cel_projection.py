"""Selectors evaluated once per part of the device they read give the full evaluation's answers."""

from __future__ import annotations

import gc

import pytest

from dralib.allocator.cel import CELError, CELOptions, DeviceInput, compile_selector, plain_domains
from dralib.allocator.cel.device import build_device
from dralib.allocator.cel.projection import projection_of
from dralib.allocator.selection import SelectionFailure, SelectorCache
from dralib.allocator.slices import DeviceInfo

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
    # Alike in the part most selectors read to devices above, but their CEL input cannot be
    # built: the full evaluation's error must come out, not the result kept for that part.
    DeviceInput(
        driver=GPU, attributes={"type": {"string": "gpu"}, "v": {"version": "not-a-version"}}
    ),
    DeviceInput(
        driver=GPU,
        attributes={"type": {"string": "gpu"}},
        capacity={"memory": {"value": "eighty"}},
    ),
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu"}, "index": {"int": "one"}}),
    # Shapes that only the full path reads: a name both bare and qualified, two value fields,
    # a value of another type than its field says, a `/` in the name.
    DeviceInput(
        driver=GPU,
        attributes={"type": {"string": "gpu"}, "gpu.example.com/type": {"string": "mig"}},
    ),
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu", "int": 1}}),
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu"}, "index": {"int": True}}),
    DeviceInput(driver=GPU, attributes={"gpu.example.com/type/x": {"string": "gpu"}}),
    DeviceInput(driver=GPU, attributes={"type": {"string": "gpu"}, "index": {"int": 2**70}}),
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


@pytest.mark.parametrize("expression", [e for e in EXPRESSIONS if projection_of(e) is not None])
def test_the_key_read_from_raw_attributes_is_the_projected_key(expression: str) -> None:
    """For a plain device, `raw_key` gives the key `project` gives from the full CEL input."""
    projection = projection_of(expression)
    assert projection is not None
    checked = 0
    for device in DEVICES:
        domains = plain_domains(device.driver, device.attributes, device.capacity)
        if domains is None:
            continue
        raw = projection.raw_key(device.driver, device.attributes, domains)
        if raw is None:
            continue
        value = selector_input(device)
        assert raw == projection.project(value)[0], device
        checked += 1
    assert checked >= 5


def selector_input(device: DeviceInput) -> dict:
    data = build_device(device)
    assert data.error is None and data.value is not None
    return data.value


def test_plain_devices_are_only_those_whose_input_cannot_fail() -> None:
    """plain_domains names the domains of plain devices and refuses every other shape."""
    plain = [
        (DEVICES[0], {GPU}),
        (DEVICES[5], {"other.example.com"}),
        (DEVICES[7], {GPU}),  # a valid version
        (DEVICES[9], set()),  # a valid capacity
    ]
    for device, domains in plain:
        found = plain_domains(device.driver, device.attributes, device.capacity)
        assert found is not None and set(found) == domains and len(found) == len(domains)
    not_plain = [DEVICES[8], *DEVICES[10:13], DEVICES[14], DEVICES[15], DEVICES[17]]
    for device in not_plain:
        assert plain_domains(device.driver, device.attributes, device.capacity) is None, device
    # Plain, but `raw_key` leaves them to the full path.
    for device in (DEVICES[13], DEVICES[16]):
        assert plain_domains(device.driver, device.attributes, device.capacity) == (GPU,)


def _info(attributes: dict, name: str = "d") -> DeviceInfo:
    return DeviceInfo({"name": name, "attributes": attributes}, driver=GPU, where="slice")


def test_selection_kept_per_device_is_kept_per_cel_options() -> None:
    """One device asked by caches with other CEL options gets each one's own answer."""
    device = _info({"models": {"strings": ["a100"]}, "type": {"string": "gpu"}})
    expressions = ('device.attributes["gpu.example.com"].type == "gpu"',)
    with_lists = SelectorCache(list_type_attributes=True)
    assert with_lists.select(expressions, (), device) is True
    uses_includes = ('device.attributes["gpu.example.com"].models.includes("a100")',)
    assert with_lists.select(uses_includes, (), device) is True
    without_lists = SelectorCache(list_type_attributes=False, new_expressions=True)
    failure = without_lists.select(uses_includes, (), device)
    assert isinstance(failure, SelectionFailure) and not failure.runtime
    assert with_lists.select(uses_includes, (), device) is True


def test_a_device_alike_to_a_selected_one_still_reports_its_own_error() -> None:
    """The result kept for a part is not given to a device whose CEL input fails."""
    cache = SelectorCache()
    expressions = ('device.attributes["gpu.example.com"].type == "gpu"',)
    good = _info({"type": {"string": "gpu"}, "uuid": {"string": "a"}}, "good")
    also_good = _info({"type": {"string": "gpu"}, "uuid": {"string": "b"}}, "also-good")
    broken = _info({"type": {"string": "gpu"}, "v": {"version": "x.y"}}, "broken")
    assert cache.select(expressions, (), good) is True
    assert cache.select(expressions, (), also_good) is True
    failure = cache.select(expressions, (), broken)
    assert isinstance(failure, SelectionFailure) and failure.runtime
    assert "attribute v" in failure.message
    with pytest.raises(Exception, match="attribute v"):
        cache.matches(expressions[0], broken)
    assert cache.matches(expressions[0], also_good) is True


def test_results_kept_per_device_are_bounded() -> None:
    """A device asked many different questions keeps a bounded number of answers."""
    cache = SelectorCache()
    device = _info({"type": {"string": "gpu"}, "index": {"int": 3}})
    for index in range(100):
        expressions = (f'device.attributes["gpu.example.com"].index == {index}',)
        assert cache.select(expressions, (), device) is (index == 3)
        assert cache.select(expressions, (), device) is (index == 3)  # from the device
    assert isinstance(device.selections, dict) and 0 < len(device.selections) <= 16


def test_one_question_is_kept_as_an_untracked_tuple() -> None:
    """A device asked one question keeps a tuple, which the cyclic collector does not walk."""
    cache = SelectorCache()
    device = _info({"type": {"string": "gpu"}})
    expressions = ('device.attributes["gpu.example.com"].type == "gpu"',)
    assert cache.select(expressions, (), device) is True
    assert isinstance(device.selections, tuple)
    gc.collect()
    gc.collect()  # nested tuples: each collection untracks one more level
    assert not gc.is_tracked(device.selections)
    assert cache.select(expressions, (), device) is True
    other = ('device.attributes["gpu.example.com"].type == "mig"',)
    assert cache.select(other, (), device) is False  # evaluated: kept per projected part
    assert cache.select(other, (), device) is False  # answered from that part: kept here too
    assert isinstance(device.selections, dict) and len(device.selections) == 2
    assert cache.select(expressions, (), device) is True
