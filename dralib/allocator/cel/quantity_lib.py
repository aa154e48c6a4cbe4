"""Kubernetes' CEL quantity library: ``quantity()``, ``isQuantity()`` and Quantity members.

A Quantity value is a CEL ``map(uint, dyn)``: ``{0: "<exact decimal>", 1: R, 2: S}``. Entry 0 is
the value; entries 1 and 2 carry upstream's internal representation, which ``isInteger()`` and
``asInteger()`` look at (``quantity("1000m").isInteger()`` is false although the value is 1):
1 says whether the quantity is an int64 amount, 2 whether its scale is not negative. Each is
written as the int ``0`` for yes and the double ``0.0`` for no: CEL's heterogeneous equality
holds ``0 == 0.0``, so ``==`` between quantities still compares values only, like upstream's
``Quantity.Equal``. Arithmetic follows ``dralib.allocator.quantity.Quantity`` (exact).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any, Final

from cel_expr_python import cel

from dralib.allocator.cel.library import (
    QUANTITY,
    FunctionError,
    Overloads,
    describe,
    overload,
)
from dralib.allocator.quantity import Quantity, QuantityError

__all__ = [
    "from_quantity",
    "is_quantity",
    "overloads",
    "quantity_value",
    "to_fraction",
    "to_quantity",
]


_YES: Final = 0
_NO: Final = 0.0


def _flag(value: bool) -> int | float:
    return _YES if value else _NO


def from_quantity(quantity: Quantity) -> dict[int, Any]:
    """The CEL value of a Quantity."""
    return {
        0: quantity.normalized(),
        1: _flag(quantity.int64_amount),
        2: _flag(quantity.scale >= 0),
    }


def quantity_value(text: object) -> dict[int, Any]:
    """The CEL value of a quantity string; FunctionError when invalid.

    The value is shared between callers with the same text (devices repeat their capacities:
    parsing them again for every device was a third of building a device's CEL input); it is
    only ever read.
    """
    if not isinstance(text, str):
        raise FunctionError(f"quantity must be a string, got {type(text).__name__}")
    return _quantity_value(text)


@lru_cache(maxsize=4096)
def _quantity_value(text: str) -> dict[int, Any]:
    try:
        return from_quantity(Quantity.parse(text))
    except QuantityError as exc:
        raise FunctionError(str(exc)) from exc


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _is_yes(flag: object) -> bool:
    # bool is an int in Python but never a flag here; a double means no.
    return type(flag) is int


def is_quantity(value: object) -> bool:
    """Whether a CEL value has the shape of a Quantity."""
    return (
        isinstance(value, dict)
        and len(value) == 3
        and isinstance(value.get(0), str)
        and type(value.get(1)) in (int, float)
        and type(value.get(2)) in (int, float)
    )


def to_fraction(value: object) -> Fraction:
    """The exact number a Quantity value holds; FunctionError for any other value."""
    if is_quantity(value):
        return _fraction(value[0])  # type: ignore[index]
    raise FunctionError(f"no such overload: expected a quantity, got {describe(value)}")


def to_quantity(value: object) -> Quantity:
    """The Quantity a CEL value stands for; FunctionError for any other value."""
    exact = to_fraction(value)
    assert isinstance(value, dict)
    return Quantity.from_representation(
        exact, int64=_is_yes(value[1]), scale_nonnegative=_is_yes(value[2])
    )


def _is_integer(q: object) -> bool:
    return to_quantity(q).is_integer()


def _as_integer(q: object) -> int:
    value = to_quantity(q).as_int64()
    if value is None:
        raise FunctionError("cannot convert value to integer")
    return value


def _compare(a: object, b: object) -> int:
    left, right = to_fraction(a), to_fraction(b)
    return int((left > right) - (left < right))


def _operand(value: object) -> Quantity:
    # quantity.add(int) adds resource.NewQuantity(i, DecimalExponent): an int64 amount.
    if isinstance(value, int) and not isinstance(value, bool):
        return Quantity.from_int(value)
    return to_quantity(value)


def _add(a: object, b: object) -> dict[int, Any]:
    return from_quantity(to_quantity(a).add(_operand(b)))


def _sub(a: object, b: object) -> dict[int, Any]:
    return from_quantity(to_quantity(a).sub(_operand(b)))


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
