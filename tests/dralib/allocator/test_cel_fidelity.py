"""Upstream fidelity of the CEL environment: RE2 regexes, quantity representation, device fields,
and the size-aware cost estimate. Expected values are upstream's documented results."""

from __future__ import annotations

import re

import pytest
import re2

from dralib.allocator.cel import CELError, CELOptions, DeviceInput, compile_selector
from dralib.allocator.cel.string_lib import compile_regex

PLAIN = DeviceInput(
    driver="driver-a", capacity={"milli": {"value": "1000m"}, "mem": {"value": "8Gi"}}
)


@pytest.mark.parametrize(
    "expression",
    [
        # Kubernetes regex library examples (k8s.io/apiserver/pkg/cel/library/regex.go).
        '"abc 123".find("[0-9]+") == "123"',
        '"abc 123".find("xyz") == ""',
        '"123 abc 456".findAll("[0-9]+") == ["123", "456"]',
        '"123 abc 456".findAll("[0-9]+", 1) == ["123"]',
        '"123 abc 456".findAll("xyz") == []',
        # Go's FindAllString drops an empty match right after a match.
        '"ab".findAll("a*") == ["a", ""]',
        '"abc".findAll("x*") == ["", "", "", ""]',
        '"éa".find("a") == "a"',
        # The quantity library's examples (quantity.go): isInteger follows the representation.
        'quantity("50703").isInteger()',
        '!quantity("1000m").isInteger()',
        'quantity("1000m") == quantity("1")',
        '!quantity("1.5").isInteger()',
        'quantity("1e3").asInteger() == 1000',
        '!quantity("1").add(quantity("1000m")).isInteger()',
        'quantity("1").add(2).isInteger()',
        'quantity("0.0").add(quantity("5")).isInteger()',
        '!device.capacity["driver-a"].milli.isInteger()',
        'device.capacity["driver-a"].mem.isInteger()',
        '[quantity("1"), quantity("2")].sum() == quantity("3000m")',
        # allowMultipleAllocations defaults to false (ptr.Deref(..., false)).
        "device.allowMultipleAllocations == false",
    ],
)
def test_upstream_results(expression: str) -> None:
    """Each expression holds as it does upstream."""
    assert compile_selector(expression).matches(PLAIN) is True


@pytest.mark.parametrize(
    "expression",
    [
        '"aa".matches("(a)\\\\1")',
        '"ab".find("a(?=b)") == ""',
        '"ab".findAll("(?<=a)b").size() == 1',
        'matches("ab", "a(?!c)")',
    ],
)
def test_non_re2_syntax_is_a_compile_error(expression: str) -> None:
    """Backreferences and lookaround are not RE2 and fail at compile time."""
    with pytest.raises(CELError, match="CEL compile error: .*invalid regular expression"):
        compile_selector(expression)


def regex_engines(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The patterns compiled from now on by RE2 (linear time) and by Python's backtracking `re`."""
    compiled: dict[str, list[str]] = {"re2": [], "re": []}
    re2_compile, re_compile = re2.compile, re._compile  # type: ignore[attr-defined]

    def with_re2(pattern: str, *args: object, **kwargs: object) -> object:
        compiled["re2"].append(pattern)
        return re2_compile(pattern, *args, **kwargs)

    def with_re(pattern: object, flags: object) -> object:
        compiled["re"].append(str(pattern))
        return re_compile(pattern, flags)

    compile_regex.cache_clear()  # patterns compiled before must be compiled again, and seen
    monkeypatch.setattr(re2, "compile", with_re2)
    monkeypatch.setattr(re, "_compile", with_re)
    return compiled


def test_catastrophic_backtracking_pattern_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pattern that takes exponential time in a backtracking engine runs on RE2, never `re`."""
    engines = regex_engines(monkeypatch)
    text = "a" * 25 + "!"
    selector = compile_selector(f'"{text}".find("(a+)+$") == "" && !"{text}".matches("(a+)+$")')
    assert selector.matches(PLAIN) is True
    assert "(a+)+$" in engines["re2"]
    assert "(a+)+$" not in engines["re"]


def test_allow_multiple_allocations_is_undefined_for_new_selectors_without_the_feature() -> None:
    """Without ConsumableCapacity a new selector cannot read the field (upstream's NewExpressions
    device type); the allocator's environment still declares it."""
    new = CELOptions(consumable_capacity=False, new_expressions=True)
    for expression in ("device.allowMultipleAllocations", "!has(device.allowMultipleAllocations)"):
        with pytest.raises(CELError, match="undefined field 'allowMultipleAllocations'"):
            compile_selector(expression, options=new)
    set_device = DeviceInput(driver="d", allow_multiple_allocations=True)
    stored = CELOptions(consumable_capacity=False)
    assert compile_selector("device.allowMultipleAllocations", options=stored).matches(set_device)


def test_regex_cost_grows_with_text_and_pattern() -> None:
    """find/matches are charged (1 + len(text)) / 10 times len(pattern) / 4, like upstream."""
    short = compile_selector('device.driver.matches("a")').cost
    long_pattern = compile_selector(f'device.driver.matches("{"a" * 400}")').cost
    # A device string is at most 64 characters: ceil(65 / 10) = 7 per quarter of the pattern.
    assert long_pattern - short == 7 * (100 - 1)


def test_regex_in_a_loop_over_the_budget() -> None:
    """A long pattern matched inside nested loops over device lists exceeds the budget."""
    pattern = "a" * 4000
    expression = (
        f'device.attributes["d"].l.all(x, device.attributes["d"].l.all(y, x.matches("{pattern}")))'
    )
    with pytest.raises(CELError, match="estimated cost"):
        compile_selector(expression)
