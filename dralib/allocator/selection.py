"""CEL selector evaluation with results cached per device content.

A selector sees only the device's driver, attributes, capacity and allowMultipleAllocations, so
two devices with the same content give the same answer for the same expression, whatever node or
pool they are in. `SelectorCache` compiles each expression once (compile errors included, raised
only when a device is actually checked, as upstream does) and remembers each (expression, device
content) result. One cache can be shared by several allocators with the same CEL options.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dralib.allocator.cel import (
    CELError,
    CELOptions,
    CompiledSelector,
    DeviceInput,
    compile_selector,
)
from dralib.allocator.slices import ContentKey, DeviceInfo

# Selection results kept on one device (see SelectorCache.select).
_KEPT_PER_DEVICE = 16
# Devices whose CEL input (the converted attributes, ~2 KB each) is kept: a device's selectors
# are evaluated one after another, so a few suffice; one per device content held 200 MB at
# 100,000 devices, while the results themselves are kept in full.
INPUTS_KEPT = 4096
_UNKNOWN: Any = object()


class SelectorCompileError(Exception):
    """The expression does not compile."""


class SelectorRuntimeError(Exception):
    """The expression failed while evaluating it for a device."""


class SelectorCache:
    """Compiled selectors and per-device-content results for one set of CEL options."""

    def __init__(
        self,
        *,
        consumable_capacity: bool = True,
        list_type_attributes: bool = True,
        new_expressions: bool = False,
    ):
        # The allocator compiles in upstream's StoredExpressions environment (new_expressions
        # False), as the scheduler does; see CELOptions.
        self.options = CELOptions(
            consumable_capacity=consumable_capacity,
            list_type_attributes=list_type_attributes,
            new_expressions=new_expressions,
        )
        self.key = (consumable_capacity, list_type_attributes, new_expressions)
        self._compiled: dict[str, CompiledSelector | SelectorCompileError] = {}
        self._results: dict[tuple[str, ContentKey], bool | Exception] = {}
        self._inputs: dict[ContentKey, DeviceInput] = {}
        self._combined: dict[tuple[tuple[str, ...], tuple[str, ...], ContentKey], Any] = {}
        # Per (class, request) selectors: their compiled forms when all are projected.
        self._projected: dict[Any, list[CompiledSelector] | None] = {}
        self.evaluations = 0
        self.lookups = 0

    def entries(self) -> int:
        """Entries held: results per expression and per selector list, and kept inputs (a
        method, not __len__: an empty cache must stay truthy)."""
        return len(self._results) + len(self._combined) + len(self._inputs)

    def _compile(self, expression: str) -> CompiledSelector | SelectorCompileError:
        compiled = self._compiled.get(expression)
        if compiled is None:
            try:
                compiled = compile_selector(expression, options=self.options)
            except CELError as exc:
                compiled = SelectorCompileError(str(exc))
            self._compiled[expression] = compiled
        return compiled

    def matches(self, expression: str, device: DeviceInfo) -> bool:
        """Evaluate (or recall) the selector for the device.

        Raises SelectorCompileError or SelectorRuntimeError.
        """
        self.lookups += 1
        compiled = self._compile(expression)
        if isinstance(compiled, CompiledSelector) and compiled.projected:
            domains = device.plain_domains
            if domains is not None:
                known = compiled.known(device.driver, device.attributes, domains)
                if known is not None:
                    return known
        content = device.content_key
        key = (expression, content)
        result = self._results.get(key)
        if result is None:
            compiled = self._compile(expression)
            if isinstance(compiled, SelectorCompileError):
                raise compiled
            device_input = self._inputs.get(content)
            if device_input is None:
                if len(self._inputs) >= INPUTS_KEPT:
                    self._inputs.clear()
                device_input = DeviceInput(
                    driver=device.driver,
                    attributes=device.attributes,
                    capacity=device.capacity_raw,
                    allow_multiple_allocations=device.allow_multiple_allocations,
                )
                self._inputs[content] = device_input
            self.evaluations += 1
            try:
                result = bool(compiled.matches(device_input))
            except CELError as exc:
                result = SelectorRuntimeError(str(exc))
            self._results[key] = result
        if isinstance(result, Exception):
            raise type(result)(str(result))
        return result

    def select(
        self, class_exprs: tuple[str, ...], request_exprs: tuple[str, ...], device: DeviceInfo
    ) -> bool | SelectionFailure:
        """All class selectors, then all request selectors, in order, stopping at the first no.

        Returns True, False, or the failure of the first selector that raised.
        """
        # A device reached first is answered from the results of the parts its selectors read
        # when they are projected (devices mostly differ only in attributes no selector reads)
        # and kept on the device; else from the results per device content.
        memo_key = (self.key, class_exprs, request_exprs)
        kept = device.selections
        if isinstance(kept, tuple):
            if kept[0] == memo_key:
                answer: bool | SelectionFailure = kept[1]
                return answer
        elif kept is not None:
            found: bool | SelectionFailure | None = kept.get(memo_key)
            if found is not None:
                return found
        projected = self._select_projected(class_exprs, request_exprs, device)
        if projected is not None:
            # One question: a (key, answer) tuple, which the collector stops tracking (a dict
            # per device would be walked by every full collection); more: a bounded dict.
            if kept is None:
                device.selections = (memo_key, projected)
            elif isinstance(kept, tuple):
                device.selections = {kept[0]: kept[1], memo_key: projected}
            else:
                if len(kept) >= _KEPT_PER_DEVICE:
                    kept.clear()
                kept[memo_key] = projected
            return projected
        key = (class_exprs, request_exprs, device.content_key)
        result = self._combined.get(key)
        if result is None:
            result = self._select_uncached(class_exprs, request_exprs, device)
            self._combined[key] = result
        return result

    def _select_projected(
        self, class_exprs: tuple[str, ...], request_exprs: tuple[str, ...], device: DeviceInfo
    ) -> bool | None:
        """The answer from results already known per projected part, or None."""
        exprs = (class_exprs, request_exprs)
        selectors = self._projected.get(exprs, _UNKNOWN)
        if selectors is _UNKNOWN:
            selectors = []
            for expression in (*class_exprs, *request_exprs):
                compiled = self._compile(expression)
                if isinstance(compiled, SelectorCompileError) or not compiled.projected:
                    selectors = None
                    break
                selectors.append(compiled)
            self._projected[exprs] = selectors
        if selectors is None:
            return None  # a selector reads more of the device than its attributes
        domains = device.plain_domains
        if domains is None:
            return None
        for compiled in selectors:
            known = compiled.known(device.driver, device.attributes, domains)
            if known is None:
                return None
            if not known:
                return False
        return True

    def _select_uncached(
        self, class_exprs: tuple[str, ...], request_exprs: tuple[str, ...], device: DeviceInfo
    ) -> bool | SelectionFailure:
        for from_class, expressions in ((True, class_exprs), (False, request_exprs)):
            for index, expression in enumerate(expressions):
                try:
                    if not self.matches(expression, device):
                        return False
                except SelectorCompileError as exc:
                    return SelectionFailure(from_class, index, False, str(exc))
                except SelectorRuntimeError as exc:
                    return SelectionFailure(from_class, index, True, str(exc))
        return True


class SelectionFailure(NamedTuple):
    """Which selector failed and how."""

    from_class: bool
    selector_index: int
    runtime: bool
    message: str
