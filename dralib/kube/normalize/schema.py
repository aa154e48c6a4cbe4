"""A tiny declarative type checker for Kubernetes JSON, reporting the path of the first mismatch.

Only fields named in a shape are checked; every other key passes untouched, so fields newer than
this code survive. `None` counts as absent: Go emits `null` for nil pointers and slices without
`omitempty`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import Context, describe

# resource.Quantity's serialized form: a signed decimal number with an optional SI, binary-SI or
# decimal-exponent suffix.
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")


def child(path: str, name: str) -> str:
    """Path of field `name` inside the object at `path`."""
    return f"{path}.{name}" if path else name


def item(path: str, index: int | str) -> str:
    """Path of list index or map key `index` inside the value at `path`."""
    return f"{path}[{index}]"


class Shape(Protocol):
    """Something that can check one JSON value."""

    def check(self, value: Any, path: str, ctx: Context) -> None:
        """Raise NormalizeError if `value` at `path` does not fit."""

    def fits_all(self, value: Any) -> bool:
        """Whether `check` would pass, without building paths: True only if it passes."""


class _Scalar:
    expected = ""

    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def check(self, value: Any, path: str, ctx: Context) -> None:
        if not self.fits(value):
            raise ctx.error(path, f"expected {self.expected}, got {describe(value)}")

    def fits_all(self, value: Any) -> bool:
        return self.fits(value)


class _Str(_Scalar):
    expected = "a string"

    def fits(self, value: Any) -> bool:
        return isinstance(value, str)

    def check(self, value: Any, path: str, ctx: Context) -> None:
        # The common case first, without a call (objects have hundreds of strings).
        if type(value) is not str and not isinstance(value, str):
            raise ctx.error(path, f"expected {self.expected}, got {describe(value)}")

    def fits_all(self, value: Any) -> bool:
        return type(value) is str or isinstance(value, str)


class _Int(_Scalar):
    expected = "a 64-bit integer"

    def fits(self, value: Any) -> bool:
        # bool is an int subclass in Python but never one in JSON; Kubernetes integers are int64.
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


class _Bool(_Scalar):
    expected = "a boolean"

    def fits(self, value: Any) -> bool:
        return isinstance(value, bool)


# Quantities that matched `_QUANTITY`: a cluster writes a handful of them ("80Gi", "1") over
# and over (every device's capacity, every container's requests), each matched once.
_QUANTITIES_SEEN: set[str] = set()
_QUANTITIES_KEPT = 4096


class _Quantity(_Scalar):
    expected = "a quantity"

    def fits(self, value: Any) -> bool:
        if type(value) is str:
            if value in _QUANTITIES_SEEN:
                return True
            if _QUANTITY.match(value) is None:
                return False
            if len(_QUANTITIES_SEEN) < _QUANTITIES_KEPT:
                _QUANTITIES_SEEN.add(value)
            return True
        if isinstance(value, bool):
            return False
        if isinstance(value, int | float):
            return True
        return isinstance(value, str) and _QUANTITY.match(value) is not None


class _IntOrPercent(_Scalar):
    # IntOrString as PDBs use it: a count, or a percentage of the pods the selector matches.
    expected = "an integer or a percentage"

    def fits(self, value: Any) -> bool:
        if isinstance(value, str):
            return value.endswith("%") and value[:-1].isdigit()
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


class _Anything:
    def check(self, value: Any, path: str, ctx: Context) -> None:
        return None

    def fits_all(self, value: Any) -> bool:
        return True


STR: Shape = _Str()
INT: Shape = _Int()
BOOL: Shape = _Bool()
QUANTITY: Shape = _Quantity()
INT_OR_PERCENT: Shape = _IntOrPercent()
# RawExtension payloads (opaque driver parameters) and other free-form JSON.
ANY: Shape = _Anything()


def _require_mapping(value: Any, path: str, ctx: Context) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if not isinstance(value, Mapping):
        raise ctx.error(path, f"expected a mapping, got {describe(value)}")
    return value


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose items all fit `item`."""

    item_shape: Shape

    def check(self, value: Any, path: str, ctx: Context) -> None:
        if not isinstance(value, list | tuple):
            raise ctx.error(path, f"expected a list, got {describe(value)}")
        for index, entry in enumerate(value):
            if entry is None:
                raise ctx.error(item(path, index), "expected a value, got None")
            self.item_shape.check(entry, item(path, index), ctx)

    def fits_all(self, value: Any) -> bool:
        if type(value) is not list and not isinstance(value, list | tuple):
            return False
        fits = self.item_shape.fits_all
        # A loop, not all() over a generator: a generator per list of every object read.
        for entry in value:  # noqa: SIM110
            if entry is None or not fits(entry):
                return False
        return True


@dataclass(frozen=True)
class MapOf:
    """A JSON object used as a map: string keys, every value fits `value_shape`."""

    value_shape: Shape

    def check(self, value: Any, path: str, ctx: Context) -> None:
        mapping = _require_mapping(value, path, ctx)
        for key, entry in mapping.items():
            if not isinstance(key, str):
                raise ctx.error(path, f"expected string keys, got {describe(key)}")
            if entry is None:
                raise ctx.error(item(path, key), "expected a value, got None")
            self.value_shape.check(entry, item(path, key), ctx)

    def fits_all(self, value: Any) -> bool:
        if type(value) is not dict and not isinstance(value, Mapping):
            return False
        fits = self.value_shape.fits_all
        for key, entry in value.items():
            if type(key) is not str and not isinstance(key, str):
                return False
            if entry is None or not fits(entry):
                return False
        return True


@dataclass(frozen=True)
class Obj:
    """A JSON object with known fields; `required` ones must be present and not null."""

    fields: Mapping[str, Shape]
    required: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_required_order", tuple(sorted(self.required)))
        # Each checked field's fits_all, bound once: looking it up (and skipping ANY) for
        # every field of every value was most of walking a snapshot's objects.
        checks = {name: shape.fits_all for name, shape in self.fields.items() if shape is not ANY}
        object.__setattr__(self, "_checks", checks)
        object.__setattr__(self, "_check_items", tuple(checks.items()))

    def check(self, value: Any, path: str, ctx: Context) -> None:
        mapping = _require_mapping(value, path, ctx)
        for name in self._required_order:  # type: ignore[attr-defined]
            if mapping.get(name) is None:
                raise ctx.error(child(path, name), "required field missing")
        fields = self.fields
        # Walk the smaller side: objects often set few of the many fields a shape knows.
        if len(mapping) < len(fields):
            for name, entry in mapping.items():
                if entry is not None:
                    shape = fields.get(name)
                    if shape is not None and shape is not ANY:
                        shape.check(entry, child(path, name), ctx)
            return
        for name, shape in fields.items():
            entry = mapping.get(name)
            if entry is not None and shape is not ANY:
                shape.check(entry, child(path, name), ctx)

    def fits_all(self, value: Any) -> bool:
        if type(value) is not dict and not isinstance(value, Mapping):
            return False
        get = value.get
        for name in self._required_order:  # type: ignore[attr-defined]
            if get(name) is None:
                return False
        checks = self._checks  # type: ignore[attr-defined]
        if len(value) < len(checks):
            for name, entry in value.items():
                if entry is not None:
                    fits = checks.get(name)
                    if fits is not None and not fits(entry):
                        return False
            return True
        for name, fits in self._check_items:  # type: ignore[attr-defined]
            entry = get(name)
            if entry is not None and not fits(entry):
                return False
        return True

    def extend(self, *, required: tuple[str, ...] = (), **fields: Shape) -> Obj:
        """A copy with more (or replaced) fields and more required names."""
        return Obj({**self.fields, **fields}, self.required | frozenset(required))

    def without(self, *names: str) -> Obj:
        """A copy lacking `names` (neither checked nor required)."""
        kept = {key: shape for key, shape in self.fields.items() if key not in names}
        return Obj(kept, self.required - frozenset(names))


def obj(*, required: tuple[str, ...] = (), **fields: Shape) -> Obj:
    """Shorthand for `Obj` with keyword fields."""
    return Obj(fields, frozenset(required))


MAX_DEPTH = 64
"""Deepest nesting `plain` copies; API objects (managedFields included) stay well below 20."""
MAX_NODES = 1_000_000
"""Most values `plain` copies from one object: shared sub-objects must not multiply unseen."""


class TooLarge(ValueError):
    """An object nested too deeply or too large to copy; `path` says where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.steps: list[str] = []

    @property
    def path(self) -> str:
        """Path of the value that went over the bound, like `spec.devices[0].attributes`."""
        return "".join(reversed(self.steps)).lstrip(".")


def plain(value: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """A deep copy made only of dicts, lists and scalars, so callers never share or mutate input.

    Raises TooLarge past `max_depth` levels or `max_nodes` values: input handed over as Python
    objects may share sub-objects (or contain itself), which a naive copy would multiply.
    """
    budget = max_nodes

    def copy(value: Any, levels: int) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise TooLarge(f"more than {max_nodes} values")
        kind = type(value)
        if kind is str or kind is int or kind is bool or kind is float or value is None:
            return value
        if kind is dict or isinstance(value, Mapping):
            if levels <= 0:
                raise TooLarge(f"nested deeper than {max_depth} levels")
            copied: dict[Any, Any] = {}
            for key, entry in value.items():
                try:
                    copied[key] = copy(entry, levels - 1)
                except TooLarge as exc:
                    exc.steps.append(f".{key}")
                    raise
            return copied
        if kind is list or isinstance(value, list | tuple):
            if levels <= 0:
                raise TooLarge(f"nested deeper than {max_depth} levels")
            items: list[Any] = []
            for index, entry in enumerate(value):
                try:
                    items.append(copy(entry, levels - 1))
                except TooLarge as exc:
                    exc.steps.append(f"[{index}]")
                    raise
            return items
        return value

    return copy(value, max_depth)


def already_plain(value: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> bool:
    """Whether `plain(value)` would only copy: `value` is made of dicts, lists and scalars,
    within `plain`'s bounds (counted as `plain` counts them).

    Walks containers only, without recursion: a sixth of what copying a parsed object costs.
    A value for which this says False is given to `plain`, which copies it or names where it
    goes over a bound, as it always did.
    """
    nodes = 1
    stack: list[tuple[Any, int]] = [(value, max_depth)]
    while stack:
        current, levels = stack.pop()
        kind = type(current)
        if kind is dict:
            entries = current.values()
        elif kind is list:
            entries = current
        elif kind is str or kind is int or kind is bool or kind is float or current is None:
            continue
        else:  # a tuple or another Mapping: plain makes a dict or list of it
            return False
        if levels <= 0:
            return False
        nodes += len(entries)
        if nodes > max_nodes:
            return False
        for entry in entries:
            kind = type(entry)
            if not (kind is str or kind is int or kind is bool or kind is float or entry is None):
                stack.append((entry, levels - 1))
    return True


def plain_when_read(*, max_depth: int, json_bytes: int) -> bool:
    """Whether a value made by a bounded reader (dicts, lists and JSON scalars, no part reached
    twice, containers nested at most `max_depth` deep counting its root) whose compact JSON
    text is `json_bytes` long is certain to be within `plain`'s bounds.

    Every value takes at least one byte and every further one a comma, so such a text holds
    at most (json_bytes + 1) // 2 values: proven without walking the value.
    """
    return max_depth <= MAX_DEPTH and (json_bytes + 1) // 2 <= MAX_NODES
