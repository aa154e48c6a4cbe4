"""Tests of the CEL selector adapter: environment, library functions, errors, limits, caching."""

from __future__ import annotations

import pytest

from dralib.allocator.cel import (
    MAX_COST,
    MAX_EXPRESSION_LENGTH,
    CELError,
    CELOptions,
    DeviceInput,
    compile_selector,
    evaluations,
)
from dralib.allocator.cel.rewrite import rewrite_domain_lookups

DEVICE = DeviceInput(
    driver="driver-a",
    attributes={
        "generation": {"string": "v5"},
        "count": {"int": 3},
        "healthy": {"bool": True},
        "firmware": {"version": "1.2.3+build.7"},
        "other.dev/model": {"string": "x1"},
        "ids": {"ints": [3, 1, 2]},
        "names": {"strings": ["a", "b"]},
    },
    capacity={"memory": {"value": "8Gi"}, "other.dev/cores": {"value": "1500m"}},
    allow_multiple_allocations=True,
)

TRUE_CASES = [
    # The device variable and the domain rules.
    'device.driver == "driver-a"',
    'device.attributes["driver-a"].generation == "v5"',
    'device.attributes["driver-a"].count == 3',
    'device.attributes["driver-a"].healthy',
    'device.attributes["other.dev"].model == "x1"',
    '!("model" in device.attributes["driver-a"])',
    '!("x" in device.attributes["missing.dom"])',
    'device.attributes["missing.dom"].size() == 0',
    '"other.dev" in device.attributes && !("missing.dom" in device.attributes)',
    "device.allowMultipleAllocations",
    'cel.bind(dra, device.attributes["driver-a"], dra.count == 3 && dra.healthy)',
    # Quantity library.
    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) >= 0',
    'device.capacity["driver-a"].memory == quantity("8192Mi")',
    'device.capacity["other.dev"].cores.isLessThan(quantity("2"))',
    'device.capacity["other.dev"].cores.isGreaterThan(quantity("1"))',
    'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")',
    'quantity("1").add(2) == quantity("3")',
    'quantity("1").sub(quantity("500m")) == quantity("0.5")',
    'quantity("5").sub(6).sign() == -1',
    'quantity("1Ki").asInteger() == 1024',
    'quantity("1Ki").isInteger() && !quantity("1.5").isInteger()',
    'quantity("1.5").asApproximateFloat() == 1.5',
    'isQuantity("1Gi") && !isQuantity("1 Gi")',
    'quantity("1G").compareTo(quantity("1Gi")) == -1',
    # Semver library and version attributes.
    'device.attributes["driver-a"].firmware == semver("1.2.3")',
    'device.attributes["driver-a"].firmware.isGreaterThan(semver("1.2.0"))',
    'device.attributes["driver-a"].firmware.isLessThan(semver("1.10.0"))',
    'device.attributes["driver-a"].firmware.compareTo(semver("1.2.3-rc.1")) == 1',
    'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3',
    'isSemver("1.2.3") && !isSemver("v1.2.3") && isSemver("v1.2", true)',
    'semver("v1.0", true) == semver("1.0.0")',
    # List-typed attributes and includes.
    'device.attributes["driver-a"].ids.includes(2)',
    '!device.attributes["driver-a"].ids.includes(7)',
    'device.attributes["driver-a"].generation.includes("v5")',
    'device.attributes["driver-a"].names.exists(n, n == "b")',
    # Kubernetes lists library.
    "[1, 2, 3].isSorted() && ![3, 1].isSorted()",
    "[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0",
    '[quantity("1"), quantity("500m")].sum() == quantity("1.5")',
    "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
    '["b", "a"].min() == "a"',
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
    'device.attributes["driver-a"].ids.max() == 3',
    # Regex library.
    '"abc123".find("[0-9]+") == "123"',
    '"a1b2c3".findAll("[0-9]") == ["1", "2", "3"]',
    '"a1b2c3".findAll("[0-9]", 2) == ["1", "2"]',
    '"abc".matches("^a.c$")',
    # Strings extension.
    '"abc".charAt(1) == "b"',
    '"abcabc".indexOf("c") == 2 && "abcabc".lastIndexOf("c") == 5',
    '"ABC".lowerAscii() == "abc" && "abc".upperAscii() == "ABC"',
    '"a-b-c".split("-") == ["a", "b", "c"]',
    '"a-b".replace("-", "+") == "a+b"',
    '"abcdef".substring(2, 4) == "cd"',
    '" x ".trim() == "x"',
    '["a", "b"].join(",") == "a,b"',
    # Lists and sets extensions, optionals.
    "[1, 2, 2, 3].distinct() == [1, 2, 3]",
    "[[1], [2, 3]].flatten() == [1, 2, 3]",
    "lists.range(3) == [0, 1, 2]",
    "[3, 1, 2].sort() == [1, 2, 3] && [1, 2].reverse() == [2, 1]",
    "[1, 2, 3].slice(1, 2) == [2]",
    "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 4])",
    "sets.equivalent([1, 2], [2, 1, 1])",
    'device.attributes["driver-a"][?"generation"].orValue("") == "v5"',
    "optional.none().orValue(1) == 1",
]


@pytest.mark.parametrize("expression", TRUE_CASES)
def test_true_selectors(expression: str) -> None:
    """Each selector holds for the sample device."""
    assert compile_selector(expression).matches(DEVICE) is True


FALSE_CASES = [
    'device.driver == "driver-b"',
    'device.attributes["driver-a"].generation == "v6"',
    'device.capacity["driver-a"].memory.compareTo(quantity("16Gi")) >= 0',
    '"x" in device.attributes["other.dom"]',
    'device.attributes["driver-a"].firmware.isGreaterThan(semver("2.0.0"))',
]


@pytest.mark.parametrize("expression", FALSE_CASES)
def test_false_selectors(expression: str) -> None:
    """Each selector is false for the sample device."""
    assert compile_selector(expression).matches(DEVICE) is False


COMPILE_ERRORS = [
    ("noSuchVar", "undeclared reference to 'noSuchVar'"),
    ('quantity("1")', "must evaluate to bool"),
    ("1 + ", "compilation failed"),
    ('1 + "a"', "no matching overload"),
    ('"a" == 1', "no matching overload"),
    ('"abc".find("(") == ""', "invalid regular expression"),
]


@pytest.mark.parametrize(("expression", "message"), COMPILE_ERRORS)
def test_compile_errors(expression: str, message: str) -> None:
    """Invalid selectors fail to compile with a readable message."""
    with pytest.raises(CELError, match="CEL compile error") as info:
        compile_selector(expression)
    assert message in str(info.value)
    assert info.value.expression == expression


RUNTIME_ERRORS = [
    ('device.attributes["missing.dom"].name == "x"', "no such key: name"),
    ('device.attributes["driver-a"].nosuch == 1', "no such key: nosuch"),
    ("device.driver", "could not be converted to bool"),
    ('device.attributes["driver-a"].count', "could not be converted to bool"),
    ('quantity("bad") == quantity("1")', "quantities must match"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ('semver("1.2") == semver("1.2.0")', "parse semantic version"),
    ("[].min() == 1", "list is empty"),
    ('"abc".find(device.driver + "(") == ""', "invalid regular expression"),
]


@pytest.mark.parametrize(("expression", "message"), RUNTIME_ERRORS)
def test_runtime_errors(expression: str, message: str) -> None:
    """Runtime failures and non-bool results raise CELError naming the cause."""
    selector = compile_selector(expression)
    with pytest.raises(CELError) as info:
        selector.matches(DEVICE)
    assert message in str(info.value)


def test_unsupported_attribute_value_is_a_runtime_error() -> None:
    """An attribute without a known value type fails every evaluation, as upstream does."""
    device = DeviceInput(driver="d", attributes={"boolAttribute": {"unknown": 1}})
    with pytest.raises(CELError, match="attribute boolAttribute: unsupported attribute value"):
        compile_selector('device.driver == "d"').matches(device)


def test_invalid_version_attribute_is_a_runtime_error() -> None:
    """A malformed version attribute fails evaluation with the attribute's name."""
    device = DeviceInput(driver="d", attributes={"fw": {"version": "1.2"}})
    with pytest.raises(CELError, match="attribute fw: parse semantic version"):
        compile_selector('device.driver == "d"').matches(device)


def test_feature_switches_change_only_the_new_expressions_environment() -> None:
    """Without the features, allowMultipleAllocations and includes() are undeclared for new
    selectors (upstream's NewExpressions) but still there for the allocator (StoredExpressions)."""
    new = CELOptions(consumable_capacity=False, list_type_attributes=False, new_expressions=True)
    with pytest.raises(CELError, match="undefined field 'allowMultipleAllocations'"):
        compile_selector("device.allowMultipleAllocations", options=new)
    with pytest.raises(CELError, match="undeclared reference to 'includes'"):
        compile_selector('device.attributes["driver-a"].ids.includes(1)', options=new)
    stored = CELOptions(consumable_capacity=False, list_type_attributes=False)
    device = DeviceInput(driver="driver-a", attributes={"ids": {"ints": [1, 2]}})
    assert compile_selector("!device.allowMultipleAllocations", options=stored).matches(device)
    includes = 'device.attributes["driver-a"].ids.includes(1)'
    assert compile_selector(includes, options=stored).matches(device)


def test_too_long_expression() -> None:
    """Expressions over 10 Ki characters are rejected before compiling."""
    expression = "true && " * (MAX_EXPRESSION_LENGTH // 8) + "true"
    with pytest.raises(CELError, match="too long"):
        compile_selector(expression)


def _nested_bind(levels: int) -> str:
    text = 'cel.bind(x0, "abcdefgh", '
    for i in range(1, levels):
        text += f"cel.bind(x{i}, x{i - 1} + x{i - 1}, "
    return text + f"x{levels - 1}.size() > 0" + ")" * levels


def _nested_all(levels: int) -> str:
    text = "true"
    for i in range(levels):
        text = f"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x{i}, {text})"
    return text


_OVER_BUDGET = rf"estimated cost \d+ exceeds the limit of {MAX_COST}"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (_nested_bind(24), _OVER_BUDGET),
        (_nested_all(7), _OVER_BUDGET),
        (_nested_all(40), "recursion limit exceeded"),
        ("lists.range(1000).all(x, lists.range(1000).all(y, y >= 0))", _OVER_BUDGET),
        (
            "[" + ",".join(["1"] * 500) + "].map(a, [" + ",".join(["1"] * 500) + "].map(b, a+b))"
            ".size() > 0",
            _OVER_BUDGET,
        ),
    ],
)
def test_hostile_expressions_fail_fast(expression: str, reason: str) -> None:
    """Exploding expressions are refused at compile time (cost budget or nesting), never run."""
    before = evaluations()
    with pytest.raises(CELError, match=reason) as error:
        compile_selector(expression)
    assert str(error.value).startswith("CEL compile error: ")
    assert evaluations() == before


def test_moderate_expressions_are_allowed() -> None:
    """Bounded nesting and binding stay within the cost limit and evaluate."""
    assert compile_selector(_nested_bind(6)).matches(DEVICE)
    assert compile_selector(_nested_all(3)).matches(DEVICE)
    assert compile_selector(_nested_all(3)).cost < 1_000_000


def test_compile_cache_and_counter() -> None:
    """Compiling twice returns the cached selector; every evaluation is counted, and a selector
    reading only the driver and named attributes is evaluated once for alike devices."""
    first = compile_selector('device.driver == "cache-test" || device.capacity.size() < 0')
    assert compile_selector('device.driver == "cache-test" || device.capacity.size() < 0') is first
    before = evaluations()
    for _ in range(3):
        first.matches(DEVICE)
    assert evaluations() - before == 3
    projected = compile_selector('device.driver == "cache-test"')
    before = evaluations()
    for _ in range(3):
        projected.matches(DEVICE)
    assert evaluations() - before == 1


def test_result_is_exactly_bool() -> None:
    """matches returns a real bool."""
    assert compile_selector('device.driver == "driver-a"').matches(DEVICE) is True


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        (
            'device.attributes["a"].x',
            'device.attributes[?"a"].orValue({}).x',
        ),
        ("device.capacity.dom.x", 'device.capacity[?"dom"].orValue({}).x'),
        ('"device.attributes[\\"a\\"]" == s', '"device.attributes[\\"a\\"]" == s'),
        ("x.device.attributes[1]", "x.device.attributes[1]"),
        (
            'device.attributes[["a"][0]].x',
            'device.attributes[?["a"][0]].orValue({}).x',
        ),
    ],
)
def test_domain_rewrite(source: str, rewritten: str) -> None:
    """Only lookups on the device's attribute and capacity maps get the empty-map default."""
    assert rewrite_domain_lookups(source) == rewritten
