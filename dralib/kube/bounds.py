"""The bounds every input is read within, and the error that names where an input broke them.

`Limits` (bytes, depth, values, documents), `DocumentError` (source, document, line), the checks
of values already parsed (`check_value`, `count_values`) and `list_items`, shared by the JSON
readers (`documents`, `streaming`) and the YAML builder (`yaml_builder`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Default bound on the input size: a snapshot of a few thousand nodes fits comfortably."""
MAX_DEPTH = 64
"""Default bound on nesting; Kubernetes objects (managedFields included) stay well below 20."""
MAX_NODES = 4_000_000
"""Default bound on the number of values (scalars, lists, mappings) in one input, about 1 GB."""
MAX_DOCUMENTS = 100_000
"""Default bound on the number of documents in one YAML stream."""

_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape that may decode to a surrogate (an escaped backslash before `u` also matches:
# that only costs the slower check).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

# Maps every digit to "0", so that one substring search finds a run of digits.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
# Any integer of 19 digits or fewer, or a minus and 18, fits orjson's 64 bits (2**64 - 1 has
# 20 digits, -2**63 a minus and 19): only a longer run of digits may be read as a float.
_WIDE = b"0" * 20
_WIDE_NEGATIVE = b"-" + b"0" * 19


def integers_fit_orjson(data: bytes) -> bool:
    """Whether orjson reads every integer of the JSON text `data` exactly.

    orjson reads an integer past 64 bits as a float without a word; the json module keeps it
    exact. False when `data` holds a run of 20 digits, or of 19 after a minus, anywhere (a
    long string of digits or a long fraction too: those only take the slower path).
    """
    digits = data.translate(_DIGITS_AS_ZERO)
    return _WIDE not in digits and _WIDE_NEGATIVE not in digits


@dataclass(frozen=True)
class Limits:
    """Bounds for one input; the defaults suit snapshot files, what-if input passes smaller."""

    max_bytes: int = MAX_INPUT_BYTES
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_documents: int = MAX_DOCUMENTS


DEFAULT_LIMITS = Limits()


class DocumentError(ValueError):
    """Input that cannot be read; says where (source, document, line) and why."""

    def __init__(
        self, reason: str, *, source: str = "", document: int | None = None, line: int | None = None
    ) -> None:
        self.source = source
        self.document = document
        self.line = line
        self.reason = reason
        super().__init__(str(self))

    @property
    def where(self) -> str:
        """`file.yaml document 2 line 14`, leaving out what is not known."""
        parts = [self.source] if self.source else []
        if self.document is not None:
            parts.append(f"document {self.document}")
        if self.line is not None:
            parts.append(f"line {self.line}")
        return " ".join(parts)

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}" if self.where else self.reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.reason, self.source, self.document, self.line))


def _rebuild(reason: str, source: str, document: int | None, line: int | None) -> DocumentError:
    return DocumentError(reason, source=source, document=document, line=line)


@dataclass(frozen=True)
class Document:
    """One document of the input: its 1-based position, the line it starts on, its value."""

    index: int
    line: int
    value: Any


def decode(data: str | bytes, *, source: str = "", limits: Limits = DEFAULT_LIMITS) -> str:
    """Bytes (UTF-8, optional BOM) or text into text, within the size bound."""
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        if len(raw) > limits.max_bytes:
            raise DocumentError(_too_large(len(raw), limits), source=source)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise DocumentError(
                f"not UTF-8 text: invalid byte 0x{raw[exc.start]:02x} at offset {exc.start}",
                source=source,
                line=line,
            ) from exc
    elif isinstance(data, str):
        text = data
        # A character is at most 4 bytes: only encode when the cheap bound is not enough.
        if len(text) > limits.max_bytes or (
            len(text) * 4 > limits.max_bytes
            and len(text.encode("utf-8", "replace")) > limits.max_bytes
        ):
            raise DocumentError(
                _too_large(len(text.encode("utf-8", "replace")), limits), source=source
            )
        found = _SURROGATE.search(text)
        if found:
            line = text.count("\n", 0, found.start()) + 1
            raise DocumentError(
                f"not valid Unicode: lone surrogate U+{ord(found.group()):04X}",
                source=source,
                line=line,
            )
    else:
        raise DocumentError(f"expected text, got {type(data).__name__}", source=source)
    return text.removeprefix("\ufeff")


def _too_large(size: int, limits: Limits) -> str:
    return f"input is {_size(size)}, more than the limit of {_size(limits.max_bytes)}"


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MiB"
    if count >= 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count} bytes"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_problem(exc: Exception, *, source: str, limits: Limits) -> DocumentError:
    """The DocumentError for what the json module raised reading `source`."""
    if isinstance(exc, json.JSONDecodeError):
        return DocumentError(
            f"invalid JSON at column {exc.colno}: {exc.msg}", source=source, line=exc.lineno
        )
    if isinstance(exc, RecursionError):
        return DocumentError(f"nested deeper than {limits.max_depth} levels", source=source)
    return DocumentError(f"invalid JSON: {exc}", source=source)


def check_value(value: Any, *, source: str = "", limits: Limits = DEFAULT_LIMITS) -> None:
    """Depth, size and string checks for JSON parsed elsewhere (or objects handed over).

    Every reference is visited, so an object sharing one sub-object many times counts it each
    time, as anything that later walks or copies it would.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        current, depth = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise DocumentError(f"more than {limits.max_nodes} values", source=source)
        if isinstance(current, str):
            _check_text(current, source=source)
        elif isinstance(current, Mapping):
            if depth > limits.max_depth:
                raise DocumentError(f"nested deeper than {limits.max_depth} levels", source=source)
            for key, entry in current.items():
                if isinstance(key, str):
                    _check_text(key, source=source)
                stack.append((entry, depth + 1))
        elif isinstance(current, list | tuple):
            if depth > limits.max_depth:
                raise DocumentError(f"nested deeper than {limits.max_depth} levels", source=source)
            stack.extend((entry, depth + 1) for entry in current)


def _check_json(value: Any, text: str, *, source: str, limits: Limits) -> None:
    """`check_value` for what json.loads made of `text`, walking only its containers.

    Its strings can hold a lone surrogate only where the text has one or a `\\uD800`-style
    escape; when it has neither (the usual case), the strings need no visit, which halves the
    cost of reading a large snapshot. Otherwise the full check runs and names the problem.
    """
    if _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text):
        check_value(value, source=source, limits=limits)
        return
    count_values(value, depth=1, source=source, limits=limits)


def count_values(value: Any, *, depth: int, source: str, limits: Limits) -> int:
    """How many values `value` holds (itself included), the containers of what json.loads
    makes walked level by level without recursion; refuses nesting past the bound and more
    values than it (checked once per level)."""
    if type(value) is not dict and type(value) is not list:
        return 1
    nodes = 1
    level: list[Any] = [value]
    # A level's containers in a flat list, without a (value, depth) pair per container: a
    # quarter less of the walk, which reads every container of a snapshot.
    while level:
        if depth > limits.max_depth:
            raise DocumentError(f"nested deeper than {limits.max_depth} levels", source=source)
        deeper: list[Any] = []
        add = deeper.append
        for current in level:
            entries = current.values() if type(current) is dict else current
            nodes += len(entries)
            for entry in entries:
                if type(entry) is dict or type(entry) is list:
                    add(entry)
        if nodes > limits.max_nodes:
            raise DocumentError(f"more than {limits.max_nodes} values", source=source)
        level = deeper
        depth += 1
    return nodes


def _check_text(text: str, *, source: str) -> None:
    found = _SURROGATE.search(text)
    if found:
        raise DocumentError(
            f"not valid Unicode: lone surrogate U+{ord(found.group()):04X}", source=source
        )


def list_items(value: Any, *, consume: bool = False) -> Iterator[tuple[str, Any]]:
    """The objects of one document: a `List`/`<Kind>List`'s items, or the document itself.

    Yields (path, object): `items[3]` for list items (typed lists such as ResourceSliceList
    leave apiVersion and kind out of their items: they are filled in), "" for the document.
    A bare JSON array of objects counts as a list too. With `consume`, each item is taken out
    of the list once the caller is done with it, so a large document is freed as it is read.
    """
    if isinstance(value, list):
        for index, entry in enumerate(value):
            yield f"[{index}]", entry
            if consume:
                value[index] = None
        return
    kind = value.get("kind") if isinstance(value, Mapping) else None
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in value):
        yield "", value
        return
    items = value.get("items") or []
    if not isinstance(items, list):
        raise DocumentError(f"items: expected a list, got {type(items).__name__}")
    for index, entry in enumerate(items):
        if isinstance(entry, Mapping) and "kind" not in entry and kind != "List":
            entry = {"apiVersion": value.get("apiVersion"), "kind": kind[:-4], **entry}
        yield f"items[{index}]", entry
        if consume:
            items[index] = None
