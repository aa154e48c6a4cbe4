"""Tests of the strings extension's format() (cel-go ext.Strings version 2, as Kubernetes has it).

Format strings, arguments and expected outputs come from cel-go's ext/formatting_test.go (the
cases of the formatter before version 4 that use values a selector can hold).
"""

from __future__ import annotations

import pytest

from dralib.allocator.cel import CELError, DeviceInput, compile_selector
from dralib.allocator.cel.format_lib import go_format_float

DEVICE = DeviceInput(driver="driver-a", attributes={"model": {"string": "x1"}, "n": {"int": 7}})

UPSTREAM = [
    ("no substitution", "[]", "no substitution"),
    ("str is %s and some more", '["filler"]', "str is filler and some more"),
    ("%% and also %%", "[]", "% and also %"),
    ("%%%s%%", '["text"]', "%text%"),
    ("%s%%", '["percent on the right"]', "percent on the right%"),
    ("%%%s", '["percent on the left"]', "%percent on the left"),
    (
        "%d %d %d, %s %s %s, %d %d %d, %s %s %s",
        '[1, 2, 3, "A", "B", "C", 4, 5, 6, "D", "E", "F"]',
        "1 2 3, A B C, 4 5 6, D E F",
    ),
    ("%.3f", "[1.2345]", "1.234"),
    ("this is 5 in binary: %b", "[5]", "this is 5 in binary: 101"),
    ("this is -5 in binary: %b", "[-5]", "this is -5 in binary: -101"),
    ("unsigned 64 in binary: %b", "[uint(64)]", "unsigned 64 in binary: 1000000"),
    ("bit set from bool: %b", "[true]", "bit set from bool: 1"),
    ("%o", "[11]", "13"),
    ("%o", "[-11]", "-13"),
    ("this is an unsigned octal: %o", "[uint(65535)]", "this is an unsigned octal: 177777"),
    ("%x is 30 in hexadecimal", "[30]", "1e is 30 in hexadecimal"),
    ("%X is 20 in hexadecimal", "[30]", "1E is 20 in hexadecimal"),
    ("%x is -30 in hexadecimal", "[-30]", "-1e is -30 in hexadecimal"),
    ("%X is 6000 in hexadecimal", "[uint(6000)]", "1770 is 6000 in hexadecimal"),
    ("%x", '["Hello world!"]', "48656c6c6f20776f726c6421"),
    ("%X", '["Hello world!"]', "48656C6C6F20776F726C6421"),
    ("%x", '[b"byte string"]', "6279746520737472696e67"),
    ("%x", r'[b"\x00\x00byte string\x00"]', "00006279746520737472696e6700"),
    ("%X", '[b"byte string"]', "6279746520737472696E67"),
    ("%.6e", "[1052.032911275]", "1.052033\u202f\u00d7\u202f10\u2070\u00b3"),
    ("%f", "[2.71828]", "2.718280"),
    ("%e", "[2.71828]", "2.718280\u202f\u00d7\u202f10\u2070\u2070"),
    ("%s", "[2.71]", "2.71"),
    ("%s", "[[2.71]]", "[2.710000]"),
    ("%s", "[0.000000002]", "2e-09"),
    ("%s", "[[0.000000002]]", "[0.000000]"),
    ("%f", '["NaN"]', "NaN"),
    ("%f", '["Infinity"]', "∞"),
    ("%f", '["-Infinity"]', "-∞"),
    ("%s", '[double("NaN")]', "NaN"),
    ("%s", '[double("Inf")]', "+Inf"),
    ("%s", '[double("-Inf")]', "-Inf"),
    ("%s", '[[double("NaN"),double("+Inf"), double("-Inf")]]', '["NaN", "+Inf", "-Inf"]'),
    ("%d", "[uint(64)]", "64"),
    ("null: %s", "[null]", "null: null"),
    ("%s", "[999999999999]", "999999999999"),
    ("some bytes: %s", '[b"xyz"]', "some bytes: xyz"),
    (
        "%s",
        '[{"key1": b"xyz", "key5": null, "key4": true, "key3": 2.71828}]',
        '{"key1":b"xyz", "key3":2.718280, "key4":true, "key5":null}',
    ),
    ("%s", '[{1: "value1", uint(2): "value2"}]', '{1:"value1", 2:"value2"}'),
    ("true bool: %s, false bool: %s", "[true, false]", "true bool: true, false bool: false"),
    ("%s", '[[6, 4.2, "a string"]]', '[6, 4.200000, "a string"]'),
    ("%.200f", "[1.0]", "1." + "0" * 200),
]


@pytest.mark.parametrize(("template", "args", "expected"), UPSTREAM)
def test_upstream_examples(template: str, args: str, expected: str) -> None:
    """format() gives cel-go's output for upstream's cases."""
    expression = f"{template!r}.format({args}) == {expected!r}"
    assert compile_selector(expression).matches(DEVICE)


def test_two_variable_comprehension_examples_with_format() -> None:
    """cel-go's comprehension examples that use format() evaluate to true."""
    for expression in (
        "['Hello', 'world'].transformList(i, v, \"[%d]%s\".format([i, v.lowerAscii()]))"
        ' == ["[0]hello", "[1]world"]',
        "['hello', 'world'].transformList(i, v, v.startsWith('greeting'),"
        ' "[%d]%s".format([i, v])) == []',
        "{'Hello': 'world'}.transformList(k, v, \"%s=%s\".format([k.lowerAscii(), v]))"
        ' == ["hello=world"]',
        "dyn({'Hello': 'world'}).transformList(k, v, \"%s=%s\".format([k.lowerAscii(), v]))"
        ' == ["hello=world"]',
        "{'hello': 'world', 'goodbye': 'cruel world'}.transformMap(k, v, v.startsWith('world'),"
        " \"%s, %s!\".format([k, v])) == {'hello': 'hello, world!'}",
        '"%s-%d".format([device.attributes["driver-a"].model, device.attributes["driver-a"].n])'
        ' == "x1-7"',
    ):
        assert compile_selector(expression).matches(DEVICE), expression


@pytest.mark.parametrize(
    ("template", "args", "message"),
    [
        ("%a", "[1]", 'could not parse formatting clause: unrecognized formatting clause "a"'),
        ("%d %d %d", "[0, 1]", "index 2 out of range"),
        ("string is %b", '["abc"]', "only integers and bools can be formatted as binary, was"),
        ("%d", '["1"]', "decimal clause can only be used on integers, was given string"),
        ("octal: %o", '["a string"]', "octal clause can only be used on integers, was given"),
        ("double is %x", "[0.5]", "can be formatted as hex, was given double"),
        ("double is %E", "[0.5]", 'unrecognized formatting clause "E"'),
        ("null: %d", "[null]", "decimal clause can only be used on integers, was given null_type"),
        ("null: %f", "[null]", "fixed-point clause can only be used on doubles, was given null"),
        ("null: %e", "[null]", "scientific clause can only be used on doubles, was given null"),
        ("filler %", "[1]", "unexpected end of string"),
        ("double is %.34", "[5.0]", "could not find end of precision specifier"),
        ("%s", r'[b"\xff"]', "invalid UTF-8 in bytes, cannot convert to string"),
        ("%.1001f", "[1.0]", "precision 1001 exceeds maximum allowed precision 1000"),
    ],
)
def test_errors(template: str, args: str, message: str) -> None:
    """Bad clauses and arguments fail at evaluation with cel-go's messages."""
    with pytest.raises(CELError, match="CEL runtime error") as error:
        compile_selector(f"{template!r}.format({args}) == ''").matches(DEVICE)
    assert message in str(error.value)


def test_go_float_text() -> None:
    """%s of a double prints like Go's strconv.FormatFloat(x, 'g', -1, 64)."""
    cases = {1e6: "1e+06", 123456.0: "123456", 1234567.0: "1.234567e+06", 1e-05: "1e-05"}
    cases |= {0.0001: "0.0001", -0.0: "-0", 100.0: "100", -3.5e-07: "-3.5e-07", 56.8: "56.8"}
    for value, text in cases.items():
        assert go_format_float(value) == text


def test_format_cost_is_bounded() -> None:
    """A format() result feeds the size estimate, so repeated growth is refused."""
    text, previous = 'cel.bind(s, "%s%s".format(["ab", "cd"]), ', "s"
    for level in range(12):
        text += f'cel.bind(s{level}, "%s%s".format([{previous}, {previous}]), '
        previous = f"s{level}"
    with pytest.raises(CELError, match="exceeds the limit"):
        compile_selector(text + f"{previous}.size() > 0" + ")" * 13)
    assert compile_selector('"%s-%d".format(["a", 1]) == "a-1"').cost < 1000
