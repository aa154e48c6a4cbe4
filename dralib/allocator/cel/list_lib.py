"""Kubernetes' CEL lists library plus the lists and sets extensions, and DRA's ``includes``.

Quantities and semantic versions compare by value inside lists (``sort``, ``min``, ``isSorted``),
as in Kubernetes; a one-element list of a version string is a Semver, never flattened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from cel_expr_python import cel

from dralib.allocator.cel.library import (
    KINDS,
    LIST,
    FunctionError,
    Overloads,
    check_int,
    describe,
    overload,
    per_kind,
)
from dralib.allocator.cel.quantity_lib import from_quantity, is_quantity, to_fraction, to_quantity
from dralib.allocator.cel.semver_lib import is_semver, to_semver
from dralib.allocator.quantity import Quantity

__all__ = ["MAX_INCLUDES_LIST", "MAX_RANGE", "overloads", "sort_by_keys"]

# Upstream's includes() refuses longer lists to bound its cost.
MAX_INCLUDES_LIST: Final = 48
# lists.range() builds its whole result, so it is bounded like a string result is.
MAX_RANGE: Final = 1000


def _sort_key(value: object) -> Any:
    if is_quantity(value):
        return to_fraction(value)
    if is_semver(value):
        return to_semver(value)
    if isinstance(value, (bool, int, float, str, bytes)):
        return value
    raise FunctionError(f"no such overload: {describe(value)} values are not comparable")


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
    if all(is_quantity(v) for v in values):
        # Upstream sums with Quantity.Add from a zero quantity, keeping its representation rules.
        total = Quantity.from_int(0)
        for value in values:
            total = total.add(to_quantity(value))
        return from_quantity(total)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return check_int(sum(values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float(sum(values))
    raise FunctionError("no such overload: sum() needs a list of numbers or quantities")


def _extreme(values: list[Any], *, pick: Callable[..., Any], name: str) -> Any:
    if not values:
        raise FunctionError(f"{name}(): list is empty")
    keys = _keys(values)
    best = pick(range(len(values)), key=lambda i: keys[i])
    return values[best]


def _min(values: list[Any]) -> Any:
    return _extreme(values, pick=min, name="min")


def _max(values: list[Any]) -> Any:
    return _extreme(values, pick=max, name="max")


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
    if isinstance(target, list) and not is_semver(target):
        if len(target) > MAX_INCLUDES_LIST:
            raise FunctionError(
                f"'includes' function cannot be applied to lists longer than {MAX_INCLUDES_LIST}"
                " values"
            )
        return any(_equal(value, item) for value in target)
    return _equal(target, item)


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
        if isinstance(value, list) and depth > 0 and not is_semver(value):
            result.extend(_flatten(value, depth - 1))
        else:
            result.append(value)
    return result


def _range(count: int) -> list[int]:
    if count > MAX_RANGE:
        raise FunctionError(f"lists.range() is limited to {MAX_RANGE} elements here")
    return list(range(max(count, 0)))


def _slice(values: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise FunctionError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise FunctionError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if end > len(values):
        raise FunctionError(f"cannot slice({start}, {end}), list is length {len(values)}")
    return values[start:end]


def _category(value: object) -> tuple[str, Any]:
    if is_quantity(value):
        return "quantity", to_fraction(value)
    if is_semver(value):
        return "semver", to_semver(value)
    if isinstance(value, (bool, int, float, str, bytes)):
        return type(value).__name__, value
    raise FunctionError("list elements must be comparable")


def sort_by_keys(values: list[Any], keys: list[Any]) -> list[Any]:
    """cel-go's ``@sortByAssociatedKeys``: ``values`` ordered by ``keys``.

    Keys must be comparable and of one type ("list elements must be comparable", "list elements
    must have the same type"). Elements with equal keys keep their order; Go's ``sort.Slice``
    does so for lists of up to 12 elements (insertion sort) but not always for longer ones,
    where upstream's order of ties is unspecified.
    """
    if len(values) != len(keys):
        raise FunctionError(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys "
            f"list, but got {len(values)} and {len(keys)} elements respectively"
        )
    if not values:
        return values
    first, _ = _category(keys[0])
    sortable = []
    for key in keys:
        try:
            kind, comparable = _category(key)
        except FunctionError:
            kind, comparable = "", None
        if kind != first:
            raise FunctionError("list elements must have the same type")
        sortable.append(comparable)
    order = sorted(range(len(values)), key=lambda i: sortable[i])
    return [values[i] for i in order]


def _sort(values: list[Any]) -> list[Any]:
    return sort_by_keys(values, values)


def _sets_contains(values: list[Any], items: list[Any]) -> bool:
    return all(any(_equal(v, i) for v in values) for i in items)


def _sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(_equal(x, y) for y in b) for x in a)


def overloads(*, includes: bool) -> Overloads:
    """The lists and sets overloads by function name; ``includes`` adds DRA's includes()."""
    integer, boolean, dyn = cel.Type.INT, cel.Type.BOOL, cel.Type.DYN
    result: Overloads = {
        "isSorted": [overload("list_is_sorted", [LIST], boolean, _is_sorted, member=True)],
        "sum": [overload("list_sum", [LIST], dyn, _sum, member=True)],
        "min": [overload("list_min", [LIST], dyn, _min, member=True)],
        "max": [overload("list_max", [LIST], dyn, _max, member=True)],
        "indexOf": per_kind("list_index_of", [LIST], integer, _index_of),
        "lastIndexOf": per_kind("list_last_index_of", [LIST], integer, _last_index_of),
        # Lists extension (without the sortBy macro).
        "distinct": [overload("list_distinct", [LIST], LIST, _distinct, member=True)],
        "flatten": [
            overload("list_flatten", [LIST], LIST, _flatten, member=True),
            overload("list_flatten_int", [LIST, integer], LIST, _flatten, member=True),
        ],
        "lists.range": [overload("lists_range", [integer], cel.Type.List(integer), _range)],
        "reverse": [overload("list_reverse", [LIST], LIST, lambda v: v[::-1], member=True)],
        "slice": [overload("list_slice", [LIST, integer, integer], LIST, _slice, member=True)],
        "sort": [overload("list_sort", [LIST], LIST, _sort, member=True)],
        # Sets extension.
        "sets.contains": [overload("sets_contains", [LIST, LIST], boolean, _sets_contains)],
        "sets.equivalent": [overload("sets_equivalent", [LIST, LIST], boolean, _sets_equivalent)],
        "sets.intersects": [overload("sets_intersects", [LIST, LIST], boolean, _sets_intersects)],
    }
    if includes:
        result["includes"] = [
            item
            for target_name, target in KINDS
            for item in per_kind(f"dra_includes_{target_name}", [target], boolean, _includes)
        ]
    return result
