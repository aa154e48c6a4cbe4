"""Static worst-case cost estimate of a checked CEL expression.

cel_expr_python exposes no runtime cost limit and cannot interrupt an evaluation, so hostile
selectors (``cel.bind`` string doubling, deeply nested comprehensions) are stopped before they
run. The checked expression (``Expression.serialize()``, a ``google.protobuf.Any`` holding a
``cel.expr.CheckedExpr``) is decoded with a tiny protobuf wire reader, and a cost in the spirit
of cel-go's estimator is computed: every node costs 1, a comprehension costs its iteration count
times its body, and string/list sizes are tracked so concatenation and copies cost their size
(divided by 10, as cel-go charges strings). Library calls are charged like Kubernetes'
``library.CostEstimator`` (k8s.io/apiserver/pkg/cel/library/cost.go): ``matches``/``find``/
``findAll`` cost ``ceil((1 + len(text)) / 10) * ceil(len(pattern) / 4)``, string functions
(``lowerAscii``, ``quantity()``, ``semver()``, ...) a tenth of their string's length,
``replace``/``split`` two tenths, and list functions (``isSorted``, ``sum``, ``indexOf``,
``includes``, ...) one per element plus the element's length for strings. Sizes coming from the
device are bounded by upstream's API limits (64 characters per string, 64 entries per list or
map), so the estimate is an upper bound: the allocator rejects an expression whose bound exceeds
the upstream runtime limit, which also is what the API server does with its own estimate at
admission.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dralib.allocator.cel.proto import first as _first
from dralib.allocator.cel.proto import message as _message

__all__ = ["DEVICE_VALUE_SIZE", "estimate_cost"]

# Upper bound of any string, list or map reachable through ``device``.
DEVICE_VALUE_SIZE: Final = 64
# Beyond this the number only needs to say "too much"; capping keeps arithmetic small.
_CAP: Final = 1 << 62


# Functions whose result can be as large as their largest operand.
_SIZED_RESULTS: Final = frozenset(
    [
        "_[_]",
        "_?_:_",
        "_[?_]",
        "_?._",
        "orValue",
        "value",
        "or",
        "optional.of",
        "optional.ofNonZeroValue",
        "dyn",
        "string",
        "bytes",
        "split",
        "sort",
        "reverse",
        "distinct",
        "slice",
        "substring",
        "lowerAscii",
        "upperAscii",
        "trim",
        "charAt",
        "min",
        "max",
        "sum",
        "first",
        "last",
        # Helpers of the rewritten two-variable comprehensions (dralib.allocator.cel.macros).
        "__keys__",
        "__mapOf__",
        "__mapMerge__",
    ]
)


@dataclass(frozen=True)
class _Estimate:
    cost: int
    size: int  # maximum length of the value when it is a string, list or map


_REGEX: Final = frozenset({"matches", "find", "findAll"})
_STRING_RESULTS: Final = frozenset({"lowerAscii", "upperAscii", "substring", "trim"})
_STRING_TRAVERSALS: Final = _STRING_RESULTS | frozenset(
    {"quantity", "isQuantity", "semver", "isSemver", "contains", "startsWith", "endsWith"}
)
_LIST_TRAVERSALS: Final = frozenset(
    {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "includes"}
)


def _ceil_div(value: int, divisor: int) -> int:
    return -(-value // divisor)


def _cap(value: int) -> int:
    return min(value, _CAP)


class _Estimator:
    def __init__(self) -> None:
        self.sizes: dict[str, list[int]] = {}
        # Accumulators currently being stepped, and what their step appends: (count, size).
        self.accumulators: set[str] = set()
        self.appends: dict[str, tuple[int, int]] = {}

    def _bind(self, name: str, size: int) -> None:
        self.sizes.setdefault(name, []).append(size)

    def _unbind(self, name: str) -> None:
        self.sizes[name].pop()

    def expr(self, data: bytes | None) -> _Estimate:
        if data is None:
            return _Estimate(0, 0)
        fields = _message(data)
        if (const := _first(fields, 3)) is not None:
            return self._const(const)
        if (ident := _first(fields, 4)) is not None:
            name = (_first(_message(ident), 1) or b"").decode()
            stack = self.sizes.get(name)
            size = stack[-1] if stack else DEVICE_VALUE_SIZE
            return _Estimate(1, size)
        if (select := _first(fields, 5)) is not None:
            operand = self.expr(_first(_message(select), 1))
            return _Estimate(_cap(operand.cost + 1), operand.size)
        if (call := _first(fields, 6)) is not None:
            return self._call(_message(call))
        if (items := _first(fields, 7)) is not None:
            elements = [self.expr(e) for e in _message(items).get(1, []) if isinstance(e, bytes)]
            return _Estimate(
                _cap(10 + sum(e.cost for e in elements)),
                _cap(max([len(elements), *(e.size for e in elements)])),
            )
        if (struct := _first(fields, 8)) is not None:
            entries = [_message(e) for e in _message(struct).get(3, []) if isinstance(e, bytes)]
            parts = [self.expr(_first(e, 4)) for e in entries]
            parts += [self.expr(_first(e, 3)) for e in entries]
            return _Estimate(
                _cap(30 + sum(p.cost for p in parts)),
                _cap(max([len(entries), *(p.size for p in parts)])),
            )
        if (comprehension := _first(fields, 9)) is not None:
            return self._comprehension(_message(comprehension))
        return _Estimate(1, 0)

    @staticmethod
    def _const(data: bytes) -> _Estimate:
        fields = _message(data)
        for number in (6, 7):  # Constant.string_value, bytes_value
            value = _first(fields, number)
            if value is not None:
                return _Estimate(0, len(value))
        return _Estimate(0, 0)

    def _call(self, fields: dict[int, list[int | bytes]]) -> _Estimate:
        function = (_first(fields, 2) or b"").decode()
        target = self.expr(_first(fields, 1)) if _first(fields, 1) is not None else None
        args = [self.expr(a) for a in fields.get(3, []) if isinstance(a, bytes)]
        operands = ([target] if target else []) + args
        cost = 1 + sum(o.cost for o in operands)
        sizes = [o.size for o in operands]
        if function in _REGEX:
            # Upstream (cel-go's matches, Kubernetes' find/findAll): the text traversal times
            # the pattern length, ceil((1 + len(text)) * 0.1) * ceil(len(pattern) * 0.25).
            text = sizes[0] if sizes else 0
            pattern = sizes[-1] if len(sizes) > 1 else 0
            cost += _ceil_div(1 + text, 10) * _ceil_div(pattern, 4)
            size = text if function != "matches" else 0
        elif function in _STRING_TRAVERSALS:
            # lowerAscii, quantity(), semver(), ...: one pass over the string, 0.1 per character.
            size = sizes[0] if function in _STRING_RESULTS and sizes else 0
            cost += _ceil_div(sizes[0] if sizes else 0, 10)
        elif function in {"replace", "split"} and len(sizes) >= 1:
            # Two passes over the target; replace may grow it by the replacement per character.
            cost += _ceil_div(2 * sizes[0], 10)
            size = _cap(sizes[0] * max(sizes[2] if len(sizes) > 2 else 1, 1) + sizes[0])
            if function == "split":
                size = sizes[0]
        elif function in _LIST_TRAVERSALS and target is not None:
            # isSorted, sum, min, max, indexOf, lastIndexOf, includes: once over the list,
            # each element costing 1 (plus its length / 10 for strings, bounded by the device).
            cost += target.size * (1 + _ceil_div(DEVICE_VALUE_SIZE, 10))
            size = DEVICE_VALUE_SIZE if function in {"min", "max", "sum"} else 0
        elif function == "_+_":
            size = sum(sizes)
            appended = self._appended(fields)
            if appended is not None:
                # accu + [x, ...] in a map/filter step: the list grows by the literal's length,
                # its elements are no larger than before or than the literal's.
                name, count = appended
                size = max(sizes[0] + count, sizes[1])
                previous = self.appends.get(name, (0, 0))
                self.appends[name] = (max(previous[0], count), max(previous[1], sizes[1]))
            cost += size // 10
        elif function in {"sort", "__sortBy__"}:
            # cel-go charges a sort n * log2(n) comparisons (ext/lists.go).
            size = max(sizes, default=0)
            cost += size * max(size.bit_length(), 1)
        elif function == "lists.range":
            size = 1000
        elif function in {"replace", "join", "flatten", "format"}:
            # Replacements can grow a string by the replacement per character; flatten and join
            # produce everything their input holds.
            size = _cap(max(sizes, default=0) * max(max(sizes, default=1), 1))
            cost += size // 10
        elif function in _SIZED_RESULTS:
            size = max(sizes, default=0)
            cost += size // 10
        else:
            # Scalar results (comparisons, logic, size(), matching) carry no size; the function
            # still walks its inputs once.
            size = 0
            cost += max(sizes, default=0) // 10
        return _Estimate(_cap(cost), _cap(size))

    def _appended(self, fields: dict[int, list[int | bytes]]) -> tuple[str, int] | None:
        """(accumulator, literal length) when a call is ``accumulator + [literal list]``."""
        args = [a for a in fields.get(3, []) if isinstance(a, bytes)]
        if len(args) != 2:
            return None
        ident = _first(_message(args[0]), 4)
        items = _first(_message(args[1]), 7)
        if ident is None or items is None:
            return None
        name = (_first(_message(ident), 1) or b"").decode()
        if name not in self.accumulators:
            return None
        return name, len(_message(items).get(1, []))

    def _comprehension(self, fields: dict[int, list[int | bytes]]) -> _Estimate:
        iter_var = (_first(fields, 1) or b"").decode()
        accu_var = (_first(fields, 3) or b"").decode()
        iter_range = self.expr(_first(fields, 2))
        init = self.expr(_first(fields, 4))
        iterations = iter_range.size
        self._bind(iter_var, iter_range.size)
        # Each node is visited once (nested comprehensions must not multiply the work here):
        # the step is sized with the initial accumulator, then what one step adds is assumed to
        # be added on every iteration, and touching the grown accumulator costs its size.
        self._bind(accu_var, init.size)
        outer = accu_var in self.accumulators
        self.accumulators.add(accu_var)
        saved = self.appends.pop(accu_var, None)
        condition = self.expr(_first(fields, 5))
        step = self.expr(_first(fields, 6))
        appended = self.appends.pop(accu_var, None)
        if saved is not None:
            self.appends[accu_var] = saved
        if not outer:
            self.accumulators.discard(accu_var)
        self._unbind(accu_var)
        accu_size = _cap(init.size + iterations * max(step.size - init.size, 0))
        if appended is not None:
            count, item_size = appended
            accu_size = _cap(max(init.size + iterations * count, item_size))
        if iterations:
            accu_size = max(accu_size, step.size)
        self._bind(accu_var, accu_size)
        result = self.expr(_first(fields, 7))
        self._unbind(accu_var)
        self._unbind(iter_var)
        cost = iter_range.cost + init.cost + result.cost
        step_cost = step.cost + (accu_size // 10 if step.size > init.size else 0)
        cost += iterations * (condition.cost + step_cost + 1)
        return _Estimate(_cap(cost), _cap(max(result.size, accu_size if iterations else 0)))


def estimate_cost(serialized: bytes) -> int:
    """Estimate the worst-case evaluation cost of ``Expression.serialize()`` output."""
    outer = _message(serialized)
    checked = _first(outer, 2)  # google.protobuf.Any.value
    if checked is None:
        checked = serialized
    expr = _first(_message(checked), 4)  # CheckedExpr.expr
    return _Estimator().expr(expr).cost
