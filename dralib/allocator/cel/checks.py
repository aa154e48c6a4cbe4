"""Compile-time checks of a checked selector that cel-cpp leaves to evaluation.

* A constant pattern of ``matches``, ``find`` or ``findAll`` must be a valid RE2 expression:
  cel-go compiles constant patterns while building the program, so upstream reports a
  backreference or lookaround as an error before any device is looked at; cel-cpp would only
  fail at evaluation, once per device.
* Without the ConsumableCapacity feature the device has no ``allowMultipleAllocations`` field;
  upstream's typed device variable makes reading it a compile error ("undefined field"), where
  this port's ``map(string, dyn)`` variable would only fail at evaluation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from dralib.allocator.cel import proto
from dralib.allocator.cel.library import FunctionError
from dralib.allocator.cel.string_lib import compile_regex

__all__ = ["static_errors"]

_REGEX_FUNCTIONS: Final = frozenset({"matches", "find", "findAll"})
_MULTI_ALLOC: Final = "allowMultipleAllocations"


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


def _is_device(expr: bytes | None) -> bool:
    if expr is None:
        return False
    ident = proto.first(proto.message(expr), proto.IDENT)
    return ident is not None and proto.text(proto.message(ident), 1) == "device"


def _node_errors(fields: proto.Message, *, consumable_capacity: bool) -> Iterator[str]:
    call = proto.first(fields, proto.CALL)
    if call is not None:
        parts = proto.message(call)
        function = proto.text(parts, 2)
        args = [a for a in parts.get(3, []) if isinstance(a, bytes)]
        if function in _REGEX_FUNCTIONS and args:
            # Member form: the pattern is the first argument; global matches(s, p): the second.
            pattern_arg = args[0] if proto.first(parts, 1) is not None else args[-1]
            pattern = proto.string_constant(pattern_arg)
            if pattern is not None:
                try:
                    compile_regex(pattern)
                except FunctionError as exc:
                    yield str(exc)
        if (
            not consumable_capacity
            and function == "_[_]"
            and len(args) == 2
            and _is_device(args[0])
            and proto.string_constant(args[1]) == _MULTI_ALLOC
        ):
            yield f"undefined field '{_MULTI_ALLOC}'"
    select = proto.first(fields, proto.SELECT)
    if select is not None and not consumable_capacity:
        parts = proto.message(select)
        if proto.text(parts, 2) == _MULTI_ALLOC and _is_device(proto.first(parts, 1)):
            yield f"undefined field '{_MULTI_ALLOC}'"


def static_errors(serialized: bytes, *, consumable_capacity: bool) -> list[str]:
    """Errors that upstream reports at compile time, found in ``Expression.serialize()``."""
    root = proto.checked_expr(serialized)
    errors: list[str] = []
    pending = [root] if root is not None else []
    while pending:
        fields = proto.message(pending.pop())
        errors.extend(_node_errors(fields, consumable_capacity=consumable_capacity))
        pending.extend(_children(fields))
    return errors
