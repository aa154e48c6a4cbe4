"""A tiny protobuf wire-format reader for checked CEL expressions.

``Expression.serialize()`` returns a ``google.protobuf.Any`` holding a ``cel.expr.CheckedExpr``;
the static checks and the cost estimate walk it without depending on generated protobuf code.
Field numbers are those of ``cel/expr/syntax.proto`` and ``checked.proto``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

__all__ = [
    "CONST",
    "CALL",
    "COMPREHENSION",
    "IDENT",
    "LIST",
    "SELECT",
    "STRUCT",
    "checked_expr",
    "first",
    "message",
    "string_constant",
    "text",
]

# Expr oneof fields.
CONST: Final = 3
IDENT: Final = 4
SELECT: Final = 5
CALL: Final = 6
LIST: Final = 7
STRUCT: Final = 8
COMPREHENSION: Final = 9
# Constant.string_value.
_STRING_VALUE: Final = 6

Message = dict[int, list[int | bytes]]


def varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields_of(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def message(data: bytes) -> dict[int, list[int | bytes]]:
    fields: dict[int, list[int | bytes]] = {}
    for number, _, value in fields_of(data):
        fields.setdefault(number, []).append(value)
    return fields


def first(fields: dict[int, list[int | bytes]], number: int) -> bytes | None:
    values = fields.get(number)
    if not values:
        return None
    value = values[0]
    return value if isinstance(value, bytes) else None


def text(fields: Message, number: int) -> str:
    """A string field's value ("" when absent)."""
    return (first(fields, number) or b"").decode()


def string_constant(expr: bytes | None) -> str | None:
    """The value of an Expr that is a string literal, else None."""
    if expr is None:
        return None
    constant = first(message(expr), CONST)
    if constant is None:
        return None
    value = first(message(constant), _STRING_VALUE)
    return None if value is None else value.decode()


def checked_expr(serialized: bytes) -> bytes | None:
    """The root Expr of ``Expression.serialize()`` output."""
    checked = first(message(serialized), 2)  # google.protobuf.Any.value
    if checked is None:
        checked = serialized
    return first(message(checked), 4)  # CheckedExpr.expr
