"""The strings extension's ``format`` as Kubernetes has it (cel-go ``ext.Strings`` version 2).

``"<format>".format([args])`` follows cel-go's ext/formatting.go (the formatter of versions
before 4): clauses ``%s %d %b %o %x %X %f %e`` with an optional ``.precision``, ``%%`` for a
percent sign, the same error messages, lists and maps printed like cel-go (strings quoted as
Go's ``%q``, bytes as ``b"..."``, doubles inside lists and maps with six decimals, map entries
sorted by their printed key) and ``%s`` of a double printed like Go's
``strconv.FormatFloat(x, 'g', -1, 64)``.

Differences, all about doubles and rarely used types: upstream renders ``%f`` and ``%e``
through golang.org/x/text's en_US printer. Here ``%f`` is Go's plain ``%.Nf`` (the same digits;
infinities are ``∞``/``-∞`` as upstream; digit grouping that the printer may add to values of
1000 or more is not reproduced), and ``%e`` imitates the printer's ``1.052033 × 10⁰³`` form
(checked for the exponents of upstream's examples only). Timestamps, durations and type values
cannot be formatted here (cel_expr_python hands them over as Python objects whose CEL spelling
this port does not reproduce): they are an error. A map holding both ``true`` and ``1`` (or
``false`` and ``0``) as keys reaches Python as one entry, so it prints one of them.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Final

from cel_expr_python import cel

from dralib.allocator.cel.library import FunctionError, Overloads, overload
from dralib.allocator.cel.netaddr import go_quote
from dralib.allocator.cel.string_lib import MAX_STRING_RESULT

__all__ = ["go_format_float", "overloads"]

_DEFAULT_PRECISION: Final = 6
# Upstream (version 2) has no limit; a bound keeps one call from building a huge string.
_MAX_PRECISION: Final = 1000
_SUPERSCRIPT: Final = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")


def _type_name(value: object) -> str:
    names = {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        bytes: "bytes",
        bytearray: "bytes",
    }
    if value is None:
        return "null_type"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return names.get(type(value), type(value).__name__)


def go_format_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 64)``: the shortest digits that round-trip,
    in exponent form when the decimal exponent is below -4 or 6 and above (``1e+06``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exponent  # digits before the decimal point (Go's dp)
    if text == "0":
        point = 0
    minus = "-" if sign else ""
    exp = point - 1
    if text != "0" and (exp < -4 or exp >= 6):
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}" if text != "0" else f"{minus}0"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"


def _string(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_member(v) for v in value) + "]"
    if isinstance(value, dict):
        return _map(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError as exc:
            raise FunctionError("invalid UTF-8 in bytes, cannot convert to string") from exc
    raise FunctionError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
        f"types, durations, and timestamps, was given {_type_name(value)}"
    )


def _fixed_text(value: float, precision: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.{precision}f}"


def _member(value: object) -> str:
    """A list element or map value as cel-go's formatList/formatMap print it."""
    if isinstance(value, float):
        text = _fixed_text(value, _DEFAULT_PRECISION)
        return go_quote(text) if math.isnan(value) or math.isinf(value) else text
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (bytes, bytearray)):
        return "b" + go_quote(_string(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(value)


def _map(value: dict[Any, Any]) -> str:
    entries = []
    for key, item in value.items():
        if isinstance(key, (bool, int)):
            key_text = _string(key)
        elif isinstance(key, str):
            key_text = go_quote(key)
        else:
            raise FunctionError(f"no formatting function for map key of type {_type_name(key)}")
        entries.append((key_text, _member(item)))
    entries.sort(key=lambda entry: entry[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in entries) + "}"


def _integer(value: object, clause: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise FunctionError(f"{clause}, was given {_type_name(value)}")


def _double(value: object, clause: str) -> float:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, float):
        return value
    raise FunctionError(
        f"{clause} clause can only be used on doubles, was given {_type_name(value)}"
    )


def _fixed(value: object, precision: int) -> str:
    number = _double(value, "fixed-point")
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    return _fixed_text(number, precision)


def _scientific(value: object, precision: int) -> str:
    number = _double(value, "scientific")
    if math.isnan(number) or math.isinf(number):
        return _fixed(value, precision)
    mantissa, _, exponent = f"{number:.{precision}e}".partition("e")
    sign = "⁻" if exponent.startswith("-") else ""
    return f"{mantissa}\u202f×\u202f10{sign}{exponent[1:].translate(_SUPERSCRIPT)}"


def _hex(value: object, upper: bool) -> str:
    if isinstance(value, (str, bytes, bytearray)):
        data = value.encode() if isinstance(value, str) else bytes(value)
        text = data.hex()
    else:
        number = _integer(value, "only integers, byte buffers, and strings can be formatted as hex")
        text = f"{number:x}"
    return text.upper() if upper else text


def _binary(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return f"{_integer(value, 'only integers and bools can be formatted as binary'):b}"


def _clause(spec: str, precision: int | None, value: object) -> str:
    digits = _DEFAULT_PRECISION if precision is None else precision
    if spec == "s":
        return _string(value)
    if spec == "d":
        return str(_integer(value, "decimal clause can only be used on integers"))
    if spec == "f":
        return _fixed(value, digits)
    if spec == "e":
        return _scientific(value, digits)
    if spec == "b":
        return _binary(value)
    if spec in "xX":
        return _hex(value, spec == "X")
    return f"{_integer(value, 'octal clause can only be used on integers'):o}"


def _parse_clause(text: str, start: int) -> tuple[int, str, int | None]:
    """(index after the clause, clause letter, precision) for the clause after ``%``."""
    i, precision = start, None
    if text[i] == ".":
        i += 1
        begin = i
        while True:
            if i >= len(text):
                raise FunctionError(
                    "could not parse formatting clause: error while parsing precision: "
                    "could not find end of precision specifier"
                )
            if not "0" <= text[i] <= "9":
                break
            i += 1
        if begin == i:
            raise FunctionError(
                "could not parse formatting clause: error while parsing precision: error while "
                'converting precision to integer: strconv.Atoi: parsing "": invalid syntax'
            )
        precision = int(text[begin:i])
        if precision > _MAX_PRECISION:
            raise FunctionError(
                "could not parse formatting clause: error while parsing precision: precision "
                f"{precision} exceeds maximum allowed precision {_MAX_PRECISION}"
            )
    spec = text[i]
    if spec not in "sdfebxXo":
        raise FunctionError(
            f'could not parse formatting clause: unrecognized formatting clause "{spec}"'
        )
    return i + 1, spec, precision


def _format(text: str, args: list[Any]) -> str:
    out: list[str] = []
    size = 0
    i, index = 0, 0
    while i < len(text):
        char = text[i]
        if char != "%":
            out.append(char)
            size += 1
            i += 1
            continue
        if i + 1 < len(text) and text[i + 1] == "%":
            out.append("%")
            size += 1
            i += 2
            continue
        if index >= len(args):
            raise FunctionError(f"index {index} out of range")
        if i + 1 >= len(text):
            raise FunctionError("unexpected end of string")
        i, spec, precision = _parse_clause(text, i + 1)
        try:
            piece = _clause(spec, precision, args[index])
        except FunctionError as exc:
            raise FunctionError(f"error during formatting: {exc}") from exc
        out.append(piece)
        size += len(piece)
        if size > MAX_STRING_RESULT:
            raise FunctionError(f"result would be too large ({size} characters)")
        index += 1
    return "".join(out)


def overloads() -> Overloads:
    """The ``format`` overload."""
    return {
        "format": [
            overload(
                "string_format",
                [cel.Type.STRING, cel.Type.List(cel.Type.DYN)],
                cel.Type.STRING,
                _format,
                member=True,
            )
        ]
    }
