"""Kubernetes CEL library functions that cel-cpp lacks, as cel_expr_python declarations.

Values (see the package docstring): a Quantity is ``{0: "<exact decimal>"}`` (CEL
``map(uint, string)``), a semantic version is ``["<version>"]`` (CEL ``list(string)``).
Implementations raise ``FunctionError``; cel_expr_python turns an exception raised by a Python
implementation into a CEL evaluation error carrying its message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final

from cel_expr_python import cel

from claims.allocator.quantity import Quantity, QuantityError
from claims.allocator.semver import Semver, SemverError, parse_semver

__all__ = ["FunctionError", "declarations", "quantity_value", "semver_value"]

# Upstream's includes() refuses longer lists to bound its cost.
MAX_INCLUDES_LIST: Final = 48
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1

QUANTITY: Final = cel.Type.Map(cel.Type.UINT, cel.Type.STRING)
SEMVER: Final = cel.Type.List(cel.Type.STRING)
_T = cel.Type
_LIST: Final = cel.Type.List(cel.Type.DYN)
_MAP: Final = cel.Type.Map(cel.Type.DYN, cel.Type.DYN)
# cel_expr_python's runtime does not dispatch a ``dyn`` parameter to arbitrary values, so a
# function taking "any value" gets one overload per value kind.
_KINDS: Final = (
    ("int", cel.Type.INT),
    ("uint", cel.Type.UINT),
    ("double", cel.Type.DOUBLE),
    ("string", cel.Type.STRING),
    ("bool", cel.Type.BOOL),
    ("bytes", cel.Type.BYTES),
    ("list", _LIST),
    ("map", _MAP),
)


class FunctionError(ValueError):
    """A library function applied to a value it cannot handle."""


# Value conversions ------------------------------------------------------------------------


def quantity_value(text: object) -> dict[int, str]:
    """The CEL value of a quantity string; FunctionError when invalid."""
    if not isinstance(text, str):
        raise FunctionError(f"quantity must be a string, got {type(text).__name__}")
    try:
        return _from_quantity(Quantity.parse(text))
    except QuantityError as exc:
        raise FunctionError(str(exc)) from exc


def _from_quantity(quantity: Quantity) -> dict[int, str]:
    return {0: quantity.normalized()}


def _from_fraction(value: Fraction) -> dict[int, str]:
    # Quantities are nano-scale decimals, so the exact value always has a finite decimal form.
    text = format((Decimal(value.numerator) / Decimal(value.denominator)).normalize(), "f")
    return {0: text}


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _to_fraction(value: object) -> Fraction:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(0), str):
        return _fraction(value[0])
    raise FunctionError(f"no such overload: expected a quantity, got {_describe(value)}")


def semver_value(text: object, *, normalize: bool = False) -> list[str]:
    """The CEL value of a version string; FunctionError when invalid."""
    try:
        return [parse_semver(text, normalize=normalize).without_build()]  # type: ignore[arg-type]
    except SemverError as exc:
        raise FunctionError(f"parse semantic version: {exc}") from exc


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    return parse_semver(text)


def _to_semver(value: object) -> Semver:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        try:
            return _semver(value[0])
        except SemverError:
            pass
    raise FunctionError(f"no such overload: expected a semver, got {_describe(value)}")


def _describe(value: object) -> str:
    return {bool: "bool", int: "int", float: "double", str: "string"}.get(
        type(value), type(value).__name__
    )


def _is_quantity(value: object) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(0), str)


def _is_semver(value: object) -> bool:
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)


def _check_int(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise FunctionError("integer overflow")
    return value


# Quantity library -------------------------------------------------------------------------


def _quantity_is_integer(q: object) -> bool:
    value = _to_fraction(q)
    return value.denominator == 1 and _INT64_MIN <= value.numerator <= _INT64_MAX


def _quantity_as_integer(q: object) -> int:
    if not _quantity_is_integer(q):
        raise FunctionError("cannot convert value to integer")
    return _to_fraction(q).numerator


def _cmp(a: Any, b: Any) -> int:
    return int((a > b) - (a < b))


def _quantity_compare(a: object, b: object) -> int:
    return _cmp(_to_fraction(a), _to_fraction(b))


def _quantity_add(a: object, b: object) -> dict[int, str]:
    other = b if isinstance(b, int) else _to_fraction(b)
    return _from_fraction(_to_fraction(a) + other)


def _quantity_sub(a: object, b: object) -> dict[int, str]:
    other = b if isinstance(b, int) else _to_fraction(b)
    return _from_fraction(_to_fraction(a) - other)


def _quantity_sign(a: object) -> int:
    value = _to_fraction(a)
    return (value > 0) - (value < 0)


def _quantity_float(a: object) -> float:
    return float(_to_fraction(a))


def _is_quantity_string(text: str) -> bool:
    try:
        Quantity.parse(text)
    except QuantityError:
        return False
    return True


# Semver library ---------------------------------------------------------------------------


def _semver_from_string(text: str, normalize: bool = False) -> list[str]:
    return semver_value(text, normalize=normalize)


def _is_semver_string(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize=normalize)
    except SemverError:
        return False
    return True


def _semver_compare(a: object, b: object) -> int:
    return _to_semver(a).compare(_to_semver(b))


# Comparable values for the lists library --------------------------------------------------


def _sort_key(value: object) -> Any:
    if _is_quantity(value):
        return _to_fraction(value)
    if _is_semver(value):
        return _to_semver(value)
    if isinstance(value, (bool, int, float, str, bytes)):
        return value
    raise FunctionError(f"no such overload: {_describe(value)} values are not comparable")


def _keys(values: list[Any]) -> list[Any]:
    keys = [_sort_key(v) for v in values]
    kinds = {type(k) for k in keys} - {bool}
    # CEL compares int, uint and double with each other, but not with other types.
    if len(kinds - {int, float}) > (0 if kinds <= {int, float} else 1) or (
        kinds & {int, float} and kinds - {int, float}
    ):
        raise FunctionError("no such overload: list elements of different types")
    return keys


def _is_sorted(values: list[Any]) -> bool:
    keys = _keys(values)
    return all(keys[i] <= keys[i + 1] for i in range(len(keys) - 1))


def _sum(values: list[Any]) -> Any:
    if not values:
        return 0
    if all(_is_quantity(v) for v in values):
        return _from_fraction(sum((_to_fraction(v) for v in values), Fraction(0)))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return _check_int(sum(values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float(sum(values))
    raise FunctionError("no such overload: sum() needs a list of numbers or quantities")


def _extreme(values: list[Any], pick: Callable[..., Any], name: str) -> Any:
    if not values:
        raise FunctionError(f"{name}(): list is empty")
    keys = _keys(values)
    best = pick(range(len(values)), key=lambda i: keys[i])
    return values[best]


def _min(values: list[Any]) -> Any:
    return _extreme(values, min, "min")


def _max(values: list[Any]) -> Any:
    return _extreme(values, max, "max")


def _equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _index_of(values: list[Any], item: object) -> int:
    for index, value in enumerate(values):
        if _equal(value, item):
            return index
    return -1


def _last_index_of(values: list[Any], item: object) -> int:
    for index in range(len(values) - 1, -1, -1):
        if _equal(values[index], item):
            return index
    return -1


def _includes(target: object, item: object) -> bool:
    if isinstance(target, list) and not _is_semver(target):
        if len(target) > MAX_INCLUDES_LIST:
            raise FunctionError(
                f"'includes' function cannot be applied to lists longer than {MAX_INCLUDES_LIST}"
                " values"
            )
        return any(_equal(value, item) for value in target)
    return _equal(target, item)


# Lists and sets extensions ----------------------------------------------------------------


def _distinct(values: list[Any]) -> list[Any]:
    result: list[Any] = []
    for value in values:
        if not any(_equal(value, seen) for seen in result):
            result.append(value)
    return result


def _flatten(values: list[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise FunctionError("level must be non-negative")
    result: list[Any] = []
    for value in values:
        if isinstance(value, list) and depth > 0 and not _is_semver(value):
            result.extend(_flatten(value, depth - 1))
        else:
            result.append(value)
    return result


def _range(count: int) -> list[int]:
    if count > 1000:
        raise FunctionError("lists.range() is limited to 1000 elements here")
    return list(range(max(count, 0)))


def _slice(values: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0 or start > end or end > len(values):
        raise FunctionError(f"cannot slice({start}, {end}) a list of size {len(values)}")
    return values[start:end]


def _sort(values: list[Any]) -> list[Any]:
    keys = _keys(values)
    order = sorted(range(len(values)), key=lambda i: keys[i])
    return [values[i] for i in order]


def _sets_contains(values: list[Any], items: list[Any]) -> bool:
    return all(any(_equal(v, i) for v in values) for i in items)


def _sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(_equal(x, y) for y in b) for x in a)


# Strings extension (version 2), implemented here because cel-cpp's would clash with the
# list overloads of indexOf/lastIndexOf. Indexes count code points, as CEL does.


def _char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise FunctionError(f"index out of range: {index}")
    return text[index : index + 1]


def _str_index_of(text: str, sub: str, start: int = 0) -> int:
    if start < 0 or start > len(text):
        raise FunctionError(f"index out of range: {start}")
    return text.find(sub, start)


def _str_last_index_of(text: str, sub: str, start: int | None = None) -> int:
    if start is None:
        return text.rfind(sub)
    if start < 0 or start > len(text):
        raise FunctionError(f"index out of range: {start}")
    return text.rfind(sub, 0, start + len(sub))


def _lower_ascii(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _upper_ascii(text: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in text)


def _replace(text: str, old: str, new: str, count: int = -1) -> str:
    if count == 0:
        return text
    _check_size(len(text) + len(new) * (len(text) + 1))
    return text.replace(old, new, count)


def _split(text: str, sep: str, count: int = -1) -> list[str]:
    if count == 0:
        return []
    if sep == "":
        parts = list(text)
        if count > 0 and len(parts) > count:
            parts = parts[: count - 1] + ["".join(parts[count - 1 :])]
        return parts
    return text.split(sep, count - 1 if count > 0 else -1)


def _substring(text: str, start: int, end: int | None = None) -> str:
    end = len(text) if end is None else end
    if start < 0 or end > len(text) or start > end:
        raise FunctionError(f"substring({start}, {end}) out of range for length {len(text)}")
    return text[start:end]


def _join(values: list[str], sep: str = "") -> str:
    if not all(isinstance(v, str) for v in values):
        raise FunctionError("join() needs a list of strings")
    return sep.join(values)


def _quote(text: str) -> str:
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes.update({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"})
    return '"' + "".join(escapes.get(c, c) for c in text) + '"'


# Strings built by library functions are capped like upstream's cost limit would cap them.
MAX_STRING_RESULT: Final = 1_000_000


def _check_size(size: int) -> None:
    if size > MAX_STRING_RESULT:
        raise FunctionError(f"result would be too large ({size} characters)")


# Regex library ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise FunctionError(f"invalid regular expression {pattern!r}: {exc}") from exc


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


# Declarations -----------------------------------------------------------------------------


def _guarded(impl: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Python failures into FunctionError so CEL reports a clean message."""

    def call(*args: Any) -> Any:
        try:
            return impl(*args)
        except FunctionError:
            raise
        except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:
            raise FunctionError(str(exc)) from exc

    return call


def _overload(
    overload_id: str,
    params: Sequence[Any],
    result: Any,
    impl: Callable[..., Any],
    *,
    member: bool = False,
) -> Any:
    return cel.Overload(
        overload_id,
        return_type=result,
        parameters=list(params),
        is_member=member,
        impl=_guarded(impl),
    )


def _per_kind(
    prefix: str, params: Sequence[Any], result: Any, impl: Callable[..., Any]
) -> list[Any]:
    """Member overloads whose last parameter is any value: one per value kind."""
    return [
        _overload(f"{prefix}_{name}", [*params, kind], result, impl, member=True)
        for name, kind in _KINDS
    ]


def _decl(name: str, *overloads: Any) -> Any:
    return cel.FunctionDecl(name, list(overloads))


def declarations(*, includes: bool) -> list[Any]:
    """All function declarations of the DRA selector environment."""
    q, s, string, integer, boolean = QUANTITY, SEMVER, _T.STRING, _T.INT, _T.BOOL
    decls = [
        # Quantity library.
        _decl("quantity", _overload("string_to_quantity", [string], q, quantity_value)),
        _decl(
            "isQuantity", _overload("is_quantity_string", [string], boolean, _is_quantity_string)
        ),
        _decl("sign", _overload("quantity_sign", [q], integer, _quantity_sign, member=True)),
        _decl(
            "isInteger",
            _overload("quantity_is_integer", [q], boolean, _quantity_is_integer, member=True),
        ),
        _decl(
            "asInteger",
            _overload("quantity_get_int", [q], integer, _quantity_as_integer, member=True),
        ),
        _decl(
            "asApproximateFloat",
            _overload("quantity_get_float", [q], _T.DOUBLE, _quantity_float, member=True),
        ),
        _decl(
            "add",
            _overload("quantity_add", [q, q], q, _quantity_add, member=True),
            _overload("quantity_add_int", [q, integer], q, _quantity_add, member=True),
        ),
        _decl(
            "sub",
            _overload("quantity_sub", [q, q], q, _quantity_sub, member=True),
            _overload("quantity_sub_int", [q, integer], q, _quantity_sub, member=True),
        ),
        _decl(
            "compareTo",
            _overload("quantity_compare_to", [q, q], integer, _quantity_compare, member=True),
            _overload("semver_compare_to", [s, s], integer, _semver_compare, member=True),
        ),
        _decl(
            "isGreaterThan",
            _overload(
                "quantity_greater",
                [q, q],
                boolean,
                lambda a, b: _quantity_compare(a, b) > 0,
                member=True,
            ),
            _overload(
                "semver_greater",
                [s, s],
                boolean,
                lambda a, b: _semver_compare(a, b) > 0,
                member=True,
            ),
        ),
        _decl(
            "isLessThan",
            _overload(
                "quantity_less",
                [q, q],
                boolean,
                lambda a, b: _quantity_compare(a, b) < 0,
                member=True,
            ),
            _overload(
                "semver_less",
                [s, s],
                boolean,
                lambda a, b: _semver_compare(a, b) < 0,
                member=True,
            ),
        ),
        # Semver library.
        _decl(
            "semver",
            _overload("string_to_semver", [string], s, _semver_from_string),
            _overload("string_bool_to_semver", [string, boolean], s, _semver_from_string),
        ),
        _decl(
            "isSemver",
            _overload("is_semver_string", [string], boolean, _is_semver_string),
            _overload("is_semver_string_bool", [string, boolean], boolean, _is_semver_string),
        ),
        _decl(
            "major",
            _overload("semver_major", [s], integer, lambda v: _to_semver(v).major, member=True),
        ),
        _decl(
            "minor",
            _overload("semver_minor", [s], integer, lambda v: _to_semver(v).minor, member=True),
        ),
        _decl(
            "patch",
            _overload("semver_patch", [s], integer, lambda v: _to_semver(v).patch, member=True),
        ),
        # Kubernetes lists library.
        _decl("isSorted", _overload("list_is_sorted", [_LIST], boolean, _is_sorted, member=True)),
        _decl("sum", _overload("list_sum", [_LIST], _T.DYN, _sum, member=True)),
        _decl("min", _overload("list_min", [_LIST], _T.DYN, _min, member=True)),
        _decl("max", _overload("list_max", [_LIST], _T.DYN, _max, member=True)),
        # Strings extension.
        _decl(
            "charAt", _overload("string_char_at", [string, integer], string, _char_at, member=True)
        ),
        _decl(
            "indexOf",
            *_per_kind("list_index_of", [_LIST], integer, _index_of),
            _overload("string_index_of", [string, string], integer, _str_index_of, member=True),
            _overload(
                "string_index_of_int",
                [string, string, integer],
                integer,
                _str_index_of,
                member=True,
            ),
        ),
        _decl(
            "lastIndexOf",
            *_per_kind("list_last_index_of", [_LIST], integer, _last_index_of),
            _overload(
                "string_last_index_of", [string, string], integer, _str_last_index_of, member=True
            ),
            _overload(
                "string_last_index_of_int",
                [string, string, integer],
                integer,
                _str_last_index_of,
                member=True,
            ),
        ),
        _decl(
            "lowerAscii",
            _overload("string_lower_ascii", [string], string, _lower_ascii, member=True),
        ),
        _decl(
            "upperAscii",
            _overload("string_upper_ascii", [string], string, _upper_ascii, member=True),
        ),
        _decl(
            "replace",
            _overload("string_replace", [string, string, string], string, _replace, member=True),
            _overload(
                "string_replace_int",
                [string, string, string, integer],
                string,
                _replace,
                member=True,
            ),
        ),
        _decl(
            "split",
            _overload("string_split", [string, string], _T.List(string), _split, member=True),
            _overload(
                "string_split_int", [string, string, integer], _T.List(string), _split, member=True
            ),
        ),
        _decl(
            "substring",
            _overload("string_substring", [string, integer], string, _substring, member=True),
            _overload(
                "string_substring_int", [string, integer, integer], string, _substring, member=True
            ),
        ),
        _decl("trim", _overload("string_trim", [string], string, str.strip, member=True)),
        _decl(
            "join",
            _overload("list_join", [_T.List(string)], string, _join, member=True),
            _overload("list_join_string", [_T.List(string), string], string, _join, member=True),
        ),
        _decl("strings.quote", _overload("strings_quote", [string], string, _quote)),
        # Regex library.
        _decl("find", _overload("string_find", [string, string], string, _find, member=True)),
        _decl(
            "findAll",
            _overload("string_find_all", [string, string], _T.List(string), _find_all, member=True),
            _overload(
                "string_find_all_n",
                [string, string, integer],
                _T.List(string),
                _find_all,
                member=True,
            ),
        ),
        # Lists extension (without the sortBy macro).
        _decl("distinct", _overload("list_distinct", [_LIST], _LIST, _distinct, member=True)),
        _decl(
            "flatten",
            _overload("list_flatten", [_LIST], _LIST, _flatten, member=True),
            _overload("list_flatten_int", [_LIST, integer], _LIST, _flatten, member=True),
        ),
        _decl("lists.range", _overload("lists_range", [integer], _T.List(integer), _range)),
        _decl("reverse", _overload("list_reverse", [_LIST], _LIST, lambda v: v[::-1], member=True)),
        _decl(
            "slice", _overload("list_slice", [_LIST, integer, integer], _LIST, _slice, member=True)
        ),
        _decl("sort", _overload("list_sort", [_LIST], _LIST, _sort, member=True)),
        # Sets extension.
        _decl("sets.contains", _overload("sets_contains", [_LIST, _LIST], boolean, _sets_contains)),
        _decl(
            "sets.equivalent",
            _overload("sets_equivalent", [_LIST, _LIST], boolean, _sets_equivalent),
        ),
        _decl(
            "sets.intersects",
            _overload("sets_intersects", [_LIST, _LIST], boolean, _sets_intersects),
        ),
    ]
    if includes:
        decls.append(
            _decl(
                "includes",
                *(
                    overload
                    for target_name, target in _KINDS
                    for overload in _per_kind(
                        f"dra_includes_{target_name}", [target], boolean, _includes
                    )
                ),
            )
        )
    return decls
