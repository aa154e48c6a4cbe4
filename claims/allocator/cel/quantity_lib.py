"""Kubernetes' CEL quantity library: ``quantity()``, ``isQuantity()`` and Quantity members.

A Quantity value is ``{0: "<exact decimal>"}`` (CEL ``map(uint, string)``); arithmetic runs on
exact fractions so ``add``/``sub``/``compareTo`` never round.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from cel_expr_python import cel

from claims.allocator.cel.library import (
    INT64_MAX,
    INT64_MIN,
    QUANTITY,
    FunctionError,
    Overloads,
    describe,
    overload,
)
from claims.allocator.quantity import Quantity, QuantityError

__all__ = ["from_fraction", "is_quantity", "overloads", "quantity_value", "to_fraction"]


def quantity_value(text: object) -> dict[int, str]:
    """The CEL value of a quantity string; FunctionError when invalid."""
    if not isinstance(text, str):
        raise FunctionError(f"quantity must be a string, got {type(text).__name__}")
    try:
        return {0: Quantity.parse(text).normalized()}
    except QuantityError as exc:
        raise FunctionError(str(exc)) from exc


def from_fraction(value: Fraction) -> dict[int, str]:
    """The CEL value of an exact number."""
    # Quantities are nano-scale decimals, so the exact value always has a finite decimal form.
    text = format((Decimal(value.numerator) / Decimal(value.denominator)).normalize(), "f")
    return {0: text}


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def is_quantity(value: object) -> bool:
    """Whether a CEL value has the shape of a Quantity."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(0), str)


def to_fraction(value: object) -> Fraction:
    """The exact number a Quantity value holds; FunctionError for any other value."""
    if is_quantity(value):
        return _fraction(value[0])  # type: ignore[index]
    raise FunctionError(f"no such overload: expected a quantity, got {describe(value)}")


def _is_integer(q: object) -> bool:
    value = to_fraction(q)
    return value.denominator == 1 and INT64_MIN <= value.numerator <= INT64_MAX


def _as_integer(q: object) -> int:
    if not _is_integer(q):
        raise FunctionError("cannot convert value to integer")
    return to_fraction(q).numerator


def _compare(a: object, b: object) -> int:
    left, right = to_fraction(a), to_fraction(b)
    return int((left > right) - (left < right))


def _add(a: object, b: object) -> dict[int, str]:
    other = b if isinstance(b, int) else to_fraction(b)
    return from_fraction(to_fraction(a) + other)


def _sub(a: object, b: object) -> dict[int, str]:
    other = b if isinstance(b, int) else to_fraction(b)
    return from_fraction(to_fraction(a) - other)


def _sign(a: object) -> int:
    value = to_fraction(a)
    return (value > 0) - (value < 0)


def _float(a: object) -> float:
    return float(to_fraction(a))


def _is_quantity_string(text: str) -> bool:
    try:
        Quantity.parse(text)
    except QuantityError:
        return False
    return True


def overloads() -> Overloads:
    """The quantity library's overloads by function name."""
    q, integer, boolean = QUANTITY, cel.Type.INT, cel.Type.BOOL
    return {
        "quantity": [overload("string_to_quantity", [cel.Type.STRING], q, quantity_value)],
        "isQuantity": [
            overload("is_quantity_string", [cel.Type.STRING], boolean, _is_quantity_string)
        ],
        "sign": [overload("quantity_sign", [q], integer, _sign, member=True)],
        "isInteger": [overload("quantity_is_integer", [q], boolean, _is_integer, member=True)],
        "asInteger": [overload("quantity_get_int", [q], integer, _as_integer, member=True)],
        "asApproximateFloat": [
            overload("quantity_get_float", [q], cel.Type.DOUBLE, _float, member=True)
        ],
        "add": [
            overload("quantity_add", [q, q], q, _add, member=True),
            overload("quantity_add_int", [q, integer], q, _add, member=True),
        ],
        "sub": [
            overload("quantity_sub", [q, q], q, _sub, member=True),
            overload("quantity_sub_int", [q, integer], q, _sub, member=True),
        ],
        "compareTo": [overload("quantity_compare_to", [q, q], integer, _compare, member=True)],
        "isGreaterThan": [
            overload(
                "quantity_greater", [q, q], boolean, lambda a, b: _compare(a, b) > 0, member=True
            )
        ],
        "isLessThan": [
            overload("quantity_less", [q, q], boolean, lambda a, b: _compare(a, b) < 0, member=True)
        ],
    }
