"""Compile-time checks of a checked selector that cel-cpp leaves to evaluation.

* The ``device`` variable: upstream declares it as the object type ``kubernetes.DRADevice`` with
  the fields ``driver``, ``attributes``, ``capacity`` and (see below) ``allowMultipleAllocations``.
  Selecting any other field (``device.drivr``, ``has(device.drivr)``, ``device.?drivr``) is a
  compile error "undefined field 'drivr'", and indexing the object (``device["driver"]``) is one
  too ("found no matching overload for '_[_]' applied to '(kubernetes.DRADevice, string)'"). This
  port's variable is a ``map(string, dyn)``, which would accept both and fail (or not) at
  evaluation, so `device_type_errors` reports them the way cel-go's checker does, with its
  location. Other uses of the whole object (``"driver" in device``, a macro over ``device``)
  still compile here although upstream's checker rejects them.
* ``allowMultipleAllocations`` is declared in upstream's StoredExpressions environment (the one
  the scheduler compiles with) whatever the feature gates say; only the NewExpressions
  environment (the API server validating a new or changed selector) leaves it out while
  DRAConsumableCapacity is off (``k8s.io/dynamic-resource-allocation/cel/compile.go``).
* A constant pattern of ``matches``, ``find`` or ``findAll`` must be a valid RE2 expression:
  cel-go compiles constant patterns while building the program, so upstream reports a
  backreference or lookaround as an error before any device is looked at; cel-cpp would only
  fail at evaluation, once per device (`static_errors`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from dralib.allocator.cel import proto
from dralib.allocator.cel.library import FunctionError
from dralib.allocator.cel.string_lib import compile_regex

__all__ = ["DEVICE_FIELDS", "MULTI_ALLOC_FIELD", "device_type_errors", "static_errors"]

_REGEX_FUNCTIONS: Final = frozenset({"matches", "find", "findAll"})
MULTI_ALLOC_FIELD: Final = "allowMultipleAllocations"
DEVICE_FIELDS: Final = frozenset({"driver", "attributes", "capacity"})
_DEVICE_TYPE_NAME: Final = "kubernetes.DRADevice"
_INDEX_FUNCTIONS: Final = frozenset({"_[_]", "_[?_]"})
_OPTIONAL_SELECT: Final = "_?._"
# CheckedExpr fields (checked.proto) and the Expr and SourceInfo fields they hold.
_TYPE_MAP: Final = 3
_SOURCE_INFO: Final = 5
_POSITIONS: Final = 4
_EXPR_ID: Final = 2
# Type oneof fields and the names cel-go prints for primitive types.
_TYPE_DYN: Final = 1
_TYPE_PRIMITIVE: Final = 3
_TYPE_LIST: Final = 6
_TYPE_MAP_TYPE: Final = 7
_PRIMITIVE_NAMES: Final = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}


def _children(fields: proto.Message) -> Iterator[bytes]:
    for kind, numbers in (
        (proto.SELECT, (1,)),
        (proto.CALL, (1, 3)),
        (proto.LIST, (1,)),
        (proto.COMPREHENSION, (2, 4, 5, 6, 7)),
    ):
        body = proto.first(fields, kind)
        if body is not None:
            inner = proto.message(body)
            for number in numbers:
                yield from (v for v in inner.get(number, []) if isinstance(v, bytes))
            return
    body = proto.first(fields, proto.STRUCT)
    if body is not None:
        for entry in proto.message(body).get(3, []):
            if isinstance(entry, bytes):
                parts = proto.message(entry)
                yield from (v for n in (3, 4) for v in parts.get(n, []) if isinstance(v, bytes))


def _nodes(serialized: bytes) -> Iterator[proto.Message]:
    root = proto.checked_expr(serialized)
    pending = [root] if root is not None else []
    while pending:
        fields = proto.message(pending.pop())
        yield fields
        pending.extend(_children(fields))


def _regex_errors(fields: proto.Message) -> Iterator[str]:
    call = proto.first(fields, proto.CALL)
    if call is None:
        return
    parts = proto.message(call)
    args = [a for a in parts.get(3, []) if isinstance(a, bytes)]
    if proto.text(parts, 2) in _REGEX_FUNCTIONS and args:
        # Member form: the pattern is the first argument; global matches(s, p): the second.
        pattern_arg = args[0] if proto.first(parts, 1) is not None else args[-1]
        pattern = proto.string_constant(pattern_arg)
        if pattern is not None:
            try:
                compile_regex(pattern)
            except FunctionError as exc:
                yield str(exc)


def static_errors(serialized: bytes) -> list[str]:
    """Errors that upstream reports when building the program, found in ``serialize()`` output."""
    return [error for fields in _nodes(serialized) for error in _regex_errors(fields)]


class _Checked:
    """The type map and source positions of a checked expression."""

    def __init__(self, serialized: bytes) -> None:
        checked = proto.first(proto.message(serialized), 2)  # google.protobuf.Any.value
        fields = proto.message(checked if checked is not None else serialized)
        self.types: dict[int, bytes] = {}
        for entry in fields.get(_TYPE_MAP, []):
            if isinstance(entry, bytes):
                pair = proto.message(entry)
                key, value = pair.get(1, [0])[0], proto.first(pair, 2)
                if isinstance(key, int) and value is not None:
                    self.types[key] = value
        self.positions: dict[int, int] = {}
        source_info = proto.first(fields, _SOURCE_INFO)
        if source_info is not None:
            for entry in proto.message(source_info).get(_POSITIONS, []):
                if isinstance(entry, bytes):
                    pair = proto.message(entry)
                    expr_id, offset = pair.get(1, [0])[0], pair.get(2, [0])[0]
                    if isinstance(expr_id, int) and isinstance(offset, int):
                        self.positions[expr_id] = offset

    def type_name(self, expr_id: int) -> str:
        return _type_name(self.types.get(expr_id))

    def is_device(self, expr: bytes | None) -> bool:
        """Whether the expression is the global ``device`` variable (not a variable of a macro
        or cel.bind that shadows it: those have other types)."""
        if expr is None:
            return False
        fields = proto.message(expr)
        ident = proto.first(fields, proto.IDENT)
        if ident is None or proto.text(proto.message(ident), 1) != "device":
            return False
        return self.type_name(_expr_id(fields)) == "map(string, dyn)"


def _expr_id(fields: proto.Message) -> int:
    value = fields.get(_EXPR_ID, [0])[0]
    return value if isinstance(value, int) else 0


def _type_name(data: bytes | None) -> str:
    if data is None:
        return "dyn"
    fields = proto.message(data)
    primitive = fields.get(_TYPE_PRIMITIVE)
    if primitive and isinstance(primitive[0], int):
        return _PRIMITIVE_NAMES.get(primitive[0], "dyn")
    element = proto.first(fields, _TYPE_LIST)
    if element is not None:
        return f"list({_type_name(proto.first(proto.message(element), 1))})"
    pair = proto.first(fields, _TYPE_MAP_TYPE)
    if pair is not None:
        parts = proto.message(pair)
        key, value = _type_name(proto.first(parts, 1)), _type_name(proto.first(parts, 2))
        return f"map({key}, {value})"
    return "dyn"


def _device_errors(
    fields: proto.Message, checked: _Checked, declared: frozenset[str]
) -> Iterator[tuple[int, str]]:
    """(position, message) of what cel-go's checker rejects on the typed device variable."""
    select = proto.first(fields, proto.SELECT)
    if select is not None:
        parts = proto.message(select)
        name = proto.text(parts, 2)
        if checked.is_device(proto.first(parts, 1)) and name not in declared:
            yield checked.positions.get(_expr_id(fields), 0), f"undefined field '{name}'"
        return
    call = proto.first(fields, proto.CALL)
    if call is None:
        return
    parts = proto.message(call)
    function = proto.text(parts, 2)
    args = [a for a in parts.get(3, []) if isinstance(a, bytes)]
    if len(args) != 2 or not checked.is_device(args[0]):
        return
    if function in _INDEX_FUNCTIONS:
        argument = checked.type_name(_expr_id(proto.message(args[1])))
        message = (
            f"found no matching overload for '{function}' applied to "
            f"'({_DEVICE_TYPE_NAME}, {argument})'"
        )
        yield checked.positions.get(_expr_id(fields), 0), message
    elif function == _OPTIONAL_SELECT:
        selected = proto.string_constant(args[1])
        if selected is not None and selected not in declared:
            yield checked.positions.get(_expr_id(fields), 0), f"undefined field '{selected}'"


def device_type_errors(serialized: bytes, *, text: str, multiple_allocations: bool) -> list[str]:
    """cel-go's reports (``ERROR: <input>:L:C: ...`` with the line and a caret) of the uses of
    ``device`` that its typed variable rejects; ``text`` is the compiled text, and
    ``multiple_allocations`` whether the device type declares allowMultipleAllocations."""
    checked = _Checked(serialized)
    declared = (DEVICE_FIELDS | {MULTI_ALLOC_FIELD}) if multiple_allocations else DEVICE_FIELDS
    found = sorted(
        {
            report
            for fields in _nodes(serialized)
            for report in _device_errors(fields, checked, declared)
        }
    )
    return [_report(text, offset, message) for offset, message in found]


def _report(text: str, offset: int, message: str) -> str:
    # The layout of cel-go's issues (and cel-cpp's): 1-based line and column, the source line
    # and a caret under the column.
    before = text[:offset]
    line = before.count("\n") + 1
    column = offset - (before.rfind("\n") + 1) + 1
    source = text.split("\n")[line - 1]
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {'.' * (column - 1)}^"
