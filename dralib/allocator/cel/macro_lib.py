"""Helper functions that the rewritten macros call (see `dralib.allocator.cel.macros`).

* ``__keys__(x)``: a list's indexes or a map's keys, the first iteration variable of cel-go's
  two-variable comprehensions.
* ``__mapOf__([[k, v], ...])``: the map ``transformMap`` builds, entry by entry.
* ``__mapMerge__([m, ...])``: the map ``transformMapEntry`` builds; like cel-go's
  ``cel.@mapInsert`` a key produced twice is the error "insert failed: key K already exists".
* ``__sortBy__(list, keys)``: cel-go's ``@sortByAssociatedKeys`` (`list_lib.sort_by_keys`).
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from dralib.allocator.cel.library import LIST, MAP, FunctionError, Overloads, overload
from dralib.allocator.cel.list_lib import sort_by_keys
from dralib.allocator.cel.macros import KEYS, MAP_MERGE, MAP_OF, SORT_BY

__all__ = ["overloads"]


def _keys(value: list[Any] | dict[Any, Any]) -> list[Any]:
    if isinstance(value, list):
        return list(range(len(value)))
    return list(value)


def _key_text(key: object) -> str:
    # Go's %v of a CEL value: true/false for bools, the plain number or string otherwise.
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _identity(key: object) -> tuple[bool, object]:
    # Python holds True == 1; CEL map keys of type bool and int are distinct.
    return (isinstance(key, bool), key)


def _map_of(pairs: list[list[Any]]) -> dict[Any, Any]:
    return {key: value for key, value in pairs}


def _map_merge(maps: list[dict[Any, Any]]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    seen: set[tuple[bool, object]] = set()
    for entry in maps:
        if not isinstance(entry, dict):
            raise FunctionError("no such overload: transformMapEntry needs a map result")
        for key, value in entry.items():
            if _identity(key) in seen:
                raise FunctionError(f"insert failed: key {_key_text(key)} already exists")
            seen.add(_identity(key))
            result[key] = value
    return result


def overloads() -> Overloads:
    """The helper overloads by function name."""
    pairs = cel.Type.List(LIST)
    return {
        KEYS: [
            overload("keys_list", [LIST], cel.Type.List(cel.Type.INT), _keys),
            overload("keys_map", [MAP], cel.Type.List(cel.Type.DYN), _keys),
        ],
        MAP_OF: [overload("map_of_pairs", [pairs], MAP, _map_of)],
        MAP_MERGE: [overload("map_merge", [cel.Type.List(MAP)], MAP, _map_merge)],
        SORT_BY: [overload("sort_by_keys", [LIST, LIST], LIST, sort_by_keys)],
    }
