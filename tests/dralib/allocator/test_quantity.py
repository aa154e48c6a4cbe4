"""Table tests for the exact Kubernetes Quantity port."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dralib.allocator.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    is_quantity,
    stored_form,
)

# (input, canonical String(), format, exact value)
PARSE_CASES = [
    ("0", "0", DECIMAL_SI, Fraction(0)),
    ("1", "1", DECIMAL_SI, Fraction(1)),
    ("1Ki", "1Ki", BINARY_SI, Fraction(1024)),
    ("1Mi", "1Mi", BINARY_SI, Fraction(1 << 20)),
    ("1024Mi", "1Gi", BINARY_SI, Fraction(1 << 30)),
    ("1.5Gi", "1536Mi", BINARY_SI, Fraction(3 << 29)),
    ("0.5Gi", "512Mi", BINARY_SI, Fraction(1 << 29)),
    ("1000M", "1G", DECIMAL_SI, Fraction(10**9)),
    (".001Ki", "1024m", BINARY_SI, Fraction(1024, 1000)),
    (".000001Ki", "1024u", DECIMAL_SI, Fraction(1024, 10**6)),
    (".000000001Ki", "1024n", DECIMAL_SI, Fraction(1024, 10**9)),
    (".000000000001Ki", "2n", DECIMAL_SI, Fraction(2, 10**9)),
    ("0.1", "100m", DECIMAL_SI, Fraction(1, 10)),
    ("1000m", "1", DECIMAL_SI, Fraction(1)),
    ("100m", "100m", DECIMAL_SI, Fraction(1, 10)),
    ("1.0", "1", DECIMAL_SI, Fraction(1)),
    ("1e3", "1e3", DECIMAL_EXPONENT, Fraction(1000)),
    ("12e3", "12e3", DECIMAL_EXPONENT, Fraction(12000)),
    ("1e-3", "1e-3", DECIMAL_EXPONENT, Fraction(1, 1000)),
    ("1e-20", "1e-9", DECIMAL_EXPONENT, Fraction(1, 10**9)),
    ("1.5e3", "1500", DECIMAL_EXPONENT, Fraction(1500)),
    ("10E", "10E", DECIMAL_SI, Fraction(10**19)),
    ("10000000000000000000", "10E", DECIMAL_SI, Fraction(10**19)),
    (
        "9223372036854775807.1",
        "9223372036854775807100m",
        DECIMAL_SI,
        Fraction(92233720368547758071, 10),
    ),
    ("-1.0E", "-1E", DECIMAL_SI, Fraction(-(10**18))),
    ("8Ei", "9223372036854775807", BINARY_SI, Fraction((1 << 63) - 1)),
    ("-1Ki", "-1Ki", BINARY_SI, Fraction(-1024)),
    ("1023", "1023", DECIMAL_SI, Fraction(1023)),
    ("1025Ki", "1025Ki", BINARY_SI, Fraction(1025 * 1024)),
    ("1.1n", "2n", DECIMAL_SI, Fraction(2, 10**9)),
    ("-1.1n", "-2n", DECIMAL_SI, Fraction(-2, 10**9)),
    ("500Mi", "500Mi", BINARY_SI, Fraction(500 << 20)),
    ("1500Ki", "1500Ki", BINARY_SI, Fraction(1500 * 1024)),
    ("0.5Ki", "512", BINARY_SI, Fraction(512)),
    ("1.5", "1500m", DECIMAL_SI, Fraction(3, 2)),
    ("80Gi", "80Gi", BINARY_SI, Fraction(80 << 30)),
    # Upstream keeps the input text when its fast parser sees it as canonical.
    ("+1", "+1", DECIMAL_SI, Fraction(1)),
    ("01", "01", DECIMAL_SI, Fraction(1)),
    ("1E3", "1E3", DECIMAL_EXPONENT, Fraction(1000)),
    # A lone sign or dot scans as zero upstream.
    ("-", "0", DECIMAL_SI, Fraction(0)),
    (".", "0", DECIMAL_SI, Fraction(0)),
]


@pytest.mark.parametrize(("text", "canonical", "fmt", "value"), PARSE_CASES)
def test_parse_and_format(text: str, canonical: str, fmt: str, value: Fraction) -> None:
    """Parsing gives upstream's exact value, format and canonical text."""
    quantity = Quantity.parse(text)
    assert quantity.exact == value
    assert quantity.format == fmt
    assert str(quantity) == canonical
    assert is_quantity(text)


@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3", "1e", "1K", "1+1", "1ee3", "1Ki1", "1 Gi", "1Gi ", "--1", "1e9999"]
)
def test_invalid(text: str) -> None:
    """Malformed quantities raise QuantityError, a ValueError."""
    with pytest.raises(QuantityError):
        Quantity.parse(text)
    assert not is_quantity(text)


def test_non_string_is_rejected() -> None:
    """A non-string input is a clear QuantityError."""
    with pytest.raises(QuantityError, match="must be a string"):
        Quantity.parse(5)  # type: ignore[arg-type]
    assert not is_quantity(5)


@pytest.mark.parametrize(
    ("text", "as_int64"),
    [
        ("1", 1),
        ("1k", 1000),
        ("1Ki", 1024),
        ("-1.0E", -(10**18)),
        ("1000m", None),
        ("1.5Gi", None),
        ("1.5", None),
        ("10E", None),
        ("9223372036854775807", None),
        ("1e3", 1000),
        ("0", 0),
    ],
)
def test_as_int64(text: str, as_int64: int | None) -> None:
    """AsInt64 succeeds only where upstream's int64 representation converts exactly."""
    assert Quantity.parse(text).as_int64() == as_int64
    assert Quantity.parse(text).is_integer() == (as_int64 is not None)


@pytest.mark.parametrize(
    ("a", "b", "total", "difference", "fmt"),
    [
        ("1Gi", "1Gi", "2Gi", "0", BINARY_SI),
        ("1", "500m", "1500m", "500m", DECIMAL_SI),
        ("0", "1Ki", "1Ki", "-1Ki", BINARY_SI),
        ("1e3", "1", "1001", "999", DECIMAL_EXPONENT),
        ("1.5Gi", "512Mi", "2Gi", "1Gi", BINARY_SI),
        ("9223372036854775807", "1", "9223372036854775808", "9223372036854775806", DECIMAL_SI),
    ],
)
def test_add_sub(a: str, b: str, total: str, difference: str, fmt: str) -> None:
    """Add and Sub are exact and keep the receiver's format (or the other's when zero)."""
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    assert str(qa.add(qb)) == total
    assert qa.add(qb).format == fmt
    assert str(qa.sub(qb)) == difference
    assert qa.add(qb).sub(qb) == qa


def test_int64_overflow_switches_to_exact() -> None:
    """Adding past int64 stays exact and no longer converts to int64."""
    big = Quantity.from_int((1 << 63) - 1)
    total = big.add(Quantity.from_int(1))
    assert total.exact == 1 << 63
    assert total.as_int64() is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1Gi", "1024Mi", 0),
        ("1G", "1Gi", -1),
        ("1", "999m", 1),
        ("-1", "0", -1),
        ("1e3", "1k", 0),
        ("100m", "0.1", 0),
    ],
)
def test_compare(a: str, b: str, expected: int) -> None:
    """Comparison is by exact value, independent of format."""
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    assert qa.cmp(qb) == expected
    assert (qa == qb) == (expected == 0)
    assert (qa < qb) == (expected < 0)
    if expected == 0:
        assert hash(qa) == hash(qb)


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [("1", 1, 1000), ("1.5", 2, 1500), ("-1.5", -2, -1500), ("1n", 1, 1), ("1Ki", 1024, 1024000)],
)
def test_value_and_milli_value(text: str, value: int, milli: int) -> None:
    """Value and MilliValue round up away from zero."""
    quantity = Quantity.parse(text)
    assert quantity.value_int() == value
    assert quantity.milli_value() == milli


def test_sign_float_and_normalized() -> None:
    """Sign, approximate float and the normalized decimal text agree with the value."""
    assert Quantity.parse("-5m").sign() == -1
    assert Quantity.parse("0").sign() == 0
    assert Quantity.parse("1.5Gi").as_approximate_float() == 1610612736.0
    assert Quantity.parse("1500m").normalized() == "1.5"
    assert Quantity.parse("1Ki").normalized() == Quantity.parse("1024").normalized()


def test_negated_canonical_forms() -> None:
    """Negative values format like their positive counterparts with a sign."""
    for text in ["1Ki", "1Mi", "1024Mi", "1000M", ".001Ki", ".000000000001Ki"]:
        positive = Quantity.parse(text)
        assert str(Quantity.parse("-" + text)) == "-" + str(positive)
        assert str(positive.neg()) == "-" + str(positive).lstrip("+")


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        # apimachinery's documented examples (quantity.go): 1.5 is "1500m", 1.5Gi is "1536Mi".
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        # A plain number parses as DecimalSI, whose canonical form takes the largest suffix.
        ("5000000000", "5G"),
        ("1000", "1k"),
        # Canonical text is kept, in each format.
        ("4Gi", "4Gi"),
        ("100m", "100m"),
        ("1e3", "1e3"),
        ("not-a-quantity", "not-a-quantity"),
    ],
)
def test_stored_form(sent: str, stored: str) -> None:
    """What the API server keeps is ParseQuantity(sent).String()."""
    assert stored_form(sent) == stored


def test_binary_amount_without_a_binary_suffix_round_trips_to_decimal() -> None:
    """The scheduler's NewQuantity(5e9, BinarySI) prints "5000000000" (no power of 1024 divides
    it), which the API server re-parses as DecimalSI and stores as "5G"."""
    sent = str(Quantity.from_int(5_000_000_000, BINARY_SI))
    assert sent == "5000000000"
    assert stored_form(sent) == "5G"
