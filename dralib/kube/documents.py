"""Text or bytes into JSON-shaped documents, with bounds: the one parser for user input.

What-if input, snapshot import and anything else a user pastes or uploads goes through
`load_documents`. It accepts what `kubectl` accepts (one JSON value, or a YAML stream of one or
more documents, `kind: List` included) and refuses, with a `DocumentError` naming the source,
the document and the line, whatever would let a few bytes cost a lot:

- more than `Limits.max_bytes` of input (checked before parsing);
- YAML anchors and aliases (a 600-byte "billion laughs" expands to gigabytes in any code that
  walks the result; Kubernetes manifests do not need them);
- nesting deeper than `Limits.max_depth`, or more than `Limits.max_nodes` values in all;
- invalid UTF-8, lone surrogates, NaN/Infinity, duplicate mapping keys and YAML tags that have
  no JSON meaning (binary, sets, ...). YAML timestamps stay strings, as Kubernetes reads them.

YAML goes through libyaml's event parser when PyYAML has it (falling back to the pure-Python
one); composing nodes happens here, so the limits apply before anything is built. libyaml's own
composer recurses in C and crashes the process on deeply nested input, so it is never used.
Each document is built and handed out in turn; a large snapshot is never held twice.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

import yaml

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Default bound on the input size: a snapshot of a few thousand nodes fits comfortably."""
MAX_DEPTH = 64
"""Default bound on nesting; Kubernetes objects (managedFields included) stay well below 20."""
MAX_NODES = 4_000_000
"""Default bound on the number of values (scalars, lists, mappings) in one input, about 1 GB."""
MAX_DOCUMENTS = 100_000
"""Default bound on the number of documents in one YAML stream."""

# CSafeLoader/CSafeDumper are PyYAML's libyaml bindings; absent when PyYAML was built without it.
_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class SafeDumper(_BaseDumper):  # type: ignore[misc]
    """PyYAML's safe dumper that writes a value out each time it occurs.

    PyYAML's own emits `&id001` and `*id001` for a dict or list met twice (the demo generator
    shares attribute maps between devices); the reader here refuses anchors (billion laughs), so
    without this the dashboard could not read back the YAML it wrote.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True


_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape that may decode to a surrogate (an escaped backslash before `u` also matches:
# that only costs the slower check).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NOT_FINITE = re.compile(r"^[-+]?\.(inf|Inf|INF|nan|NaN|NAN)$")
_STR_TAG = "tag:yaml.org,2002:str"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_SCALAR_TAGS = frozenset(
    {
        _STR_TAG,
        _FLOAT_TAG,
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
    }
)
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


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


def load_documents(
    data: str | bytes,
    *,
    source: str = "",
    limits: Limits = DEFAULT_LIMITS,
    loader_class: Any = None,
) -> Iterator[Document]:
    """Yield the non-empty documents of a JSON value or YAML stream, one at a time.

    `loader_class` picks the YAML parser: libyaml's when PyYAML has it, else `PurePythonLoader`.
    """
    loader_class = loader_class or _Loader
    text = decode(data, source=source, limits=limits)
    del data  # a large input is held once (as text) while it is parsed, not twice
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            json_error = exc
        else:
            _check_json(value, text, source=source, limits=limits)
            line = text.count("\n", 0, len(text) - len(stripped)) + 1
            del text, stripped  # only the value is needed from here on
            if value is not None:
                yield Document(1, line, value)
            return
        # Flow-style YAML (`{a: 1}`) starts the same way; only when YAML fails too is it an error.
        try:
            documents = list(
                _load_yaml(text, source=source, limits=limits, loader_class=loader_class)
            )
        except DocumentError:
            raise json_problem(json_error, source=source, limits=limits) from json_error
        yield from documents
        return
    yield from _load_yaml(text, source=source, limits=limits, loader_class=loader_class)


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
    makes walked without recursion; refuses nesting past the bound and more values than it."""
    if type(value) is not dict and type(value) is not list:
        return 1
    nodes = 1
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        current, level = stack.pop()
        if level > limits.max_depth:
            raise DocumentError(f"nested deeper than {limits.max_depth} levels", source=source)
        entries = current.values() if type(current) is dict else current
        nodes += len(entries)
        if nodes > limits.max_nodes:
            raise DocumentError(f"more than {limits.max_nodes} values", source=source)
        for entry in entries:
            if type(entry) is dict or type(entry) is list:
                stack.append((entry, level + 1))
    return nodes


def _check_text(text: str, *, source: str) -> None:
    found = _SURROGATE.search(text)
    if found:
        raise DocumentError(
            f"not valid Unicode: lone surrogate U+{ord(found.group()):04X}", source=source
        )


class _Loader(_Parser):  # type: ignore[misc]
    """libyaml's (or PyYAML's) event parser with a bounded builder of our own.

    `documents()` builds each document's value straight from the parser's events: no node tree
    and no constructor pass, which halves the time of a large snapshot. Neither libyaml's C
    composer (unbounded recursion) nor PyYAML's (aliases) ever runs: their entry points refuse.
    """

    parser: Any = _Parser

    def __init__(self, text: str, *, source: str, limits: Limits) -> None:
        self.parser.__init__(self, text)
        self.source = source
        self.limits = limits
        self.nodes = 0
        self.document_index = 0
        self.document_line = 0
        # Plain scalars that may resolve to something other than a string (their first letter
        # starts a YAML 1.1 null, bool, number or timestamp), resolved once per distinct text.
        self.resolved: dict[str, Any] = {}
        self.may_resolve = frozenset(self.yaml_implicit_resolvers)
        # A surrogate can only come from the text itself or from an escape sequence.
        self.check_surrogates = bool(_SURROGATE.search(text)) or "\\" in text
        # Untagged collections resolve to the default tags unless path resolvers are set.
        self.plain_collections = not self.yaml_path_resolvers

    def check_node(self) -> bool:
        raise TypeError("read documents with documents(): the node composers are not bounded")

    get_node = get_single_node = check_node

    def fail(self, reason: str, event: Any) -> DocumentError:
        mark = getattr(event, "start_mark", None)
        line = mark.line + 1 if mark is not None else None
        return DocumentError(reason, source=self.source, document=self.document_index, line=line)

    def documents(self) -> Iterator[Document]:
        while (event := self._document_start()) is not None:
            value = self._value(event, 1)
            self.get_event()  # DocumentEndEvent
            if value is not None:
                yield Document(self.document_index, self.document_line, value)

    def objects(self) -> Iterator[tuple[int, str, Any]]:
        """(document index, path, object) as `list_items` gives them, for every document.

        A `List` document's items are built and handed out one at a time (a snapshot is often
        one List: built whole, it is the whole cluster at once); other documents are built whole.
        """
        while (event := self._document_start()) is not None:
            if type(event) is yaml.MappingStartEvent:
                yield from self._list_items(event)
            else:
                value = self._value(event, 1)
                if value is not None:
                    for path, item in list_items(value, consume=True):
                        yield self.document_index, path, item
            self.get_event()  # DocumentEndEvent

    def _document_start(self) -> Any:
        """The first event of the next document's value; None at the end of the stream."""
        if self.document_index == 0 and self.check_event(yaml.StreamStartEvent):
            self.get_event()
        start = self.get_event()
        if type(start) is yaml.StreamEndEvent:
            return None
        self.document_index += 1
        if self.document_index > self.limits.max_documents:
            raise self.fail(f"more than {self.limits.max_documents} documents", start)
        self.document_line = start.start_mark.line + 1 if start.start_mark else 0
        return self.get_event()

    def _list_items(self, event: Any) -> Iterator[tuple[int, str, Any]]:
        """A mapping document; its `items` streamed when its kind (known by then) is a list."""
        self._count(event)
        self._collection_tag(event, yaml.MappingNode, _MAP_TAG)
        get_event = self.get_event
        head: dict[str, Any] = {}
        streamed = False
        while True:
            key_event = get_event()
            if type(key_event) is yaml.MappingEndEvent:
                break
            key = self._key(key_event, 2)
            if key in head or (streamed and key == "items"):
                raise self.fail(f"duplicate key {key!r}", key_event)
            value_event = get_event()
            kind = head.get("kind")
            if (
                key == "items"
                and type(value_event) is yaml.SequenceStartEvent
                and isinstance(kind, str)
                and kind.endswith("List")
                and (kind == "List" or "apiVersion" in head)
            ):
                streamed = True
                self._count(value_event)
                self._collection_tag(value_event, yaml.SequenceNode, _SEQ_TAG)
                position = 0
                while type(item_event := get_event()) is not yaml.SequenceEndEvent:
                    entry = self._value(item_event, 3)
                    if isinstance(entry, Mapping) and "kind" not in entry and kind != "List":
                        entry = {"apiVersion": head.get("apiVersion"), "kind": kind[:-4], **entry}
                    yield self.document_index, f"items[{position}]", entry
                    position += 1
                continue
            head[key] = self._value(value_event, 2)
        if not streamed:
            try:
                for path, item in list_items(head, consume=True):
                    yield self.document_index, path, item
            except DocumentError as exc:
                raise self.fail(exc.reason, event) from exc

    def _count(self, event: Any) -> None:
        if getattr(event, "anchor", None) is not None:
            raise self.fail(
                f"YAML anchor &{event.anchor} is not supported: write the value out", event
            )
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise self.fail(f"more than {self.limits.max_nodes} values", event)

    def _value(self, event: Any, depth: int) -> Any:
        kind = type(event)
        if kind is yaml.AliasEvent:
            raise self.fail(
                f"YAML alias *{event.anchor} is not supported: write the value out", event
            )
        self._count(event)
        if kind is yaml.ScalarEvent:
            return self._scalar(event)
        if depth > self.limits.max_depth:
            raise self.fail(f"nested deeper than {self.limits.max_depth} levels", event)
        get_event = self.get_event
        if event.tag is not None or not self.plain_collections:
            if kind is yaml.SequenceStartEvent:
                self._collection_tag(event, yaml.SequenceNode, _SEQ_TAG)
            elif kind is yaml.MappingStartEvent:
                self._collection_tag(event, yaml.MappingNode, _MAP_TAG)
        if kind is yaml.SequenceStartEvent:
            items: list[Any] = []
            while True:
                item = get_event()
                if type(item) is yaml.SequenceEndEvent:
                    return items
                items.append(self._value(item, depth + 1))
        if kind is yaml.MappingStartEvent:
            return self._mapping(depth)
        raise self.fail(f"unexpected YAML event {kind.__name__}", event)

    def _mapping(self, depth: int) -> dict[str, Any]:
        """The entries of a mapping whose start event was read.

        Most keys and values are plain scalars: counted and taken here, with what `_key`,
        `_count` and `_scalar` would do for them (three calls per scalar were most of reading
        a large YAML snapshot); anything else goes through those.
        """
        get_event = self.get_event
        scalar_event = yaml.ScalarEvent
        max_nodes = self.limits.max_nodes
        may_resolve = self.may_resolve
        resolved = self.resolved
        plain = not self.check_surrogates
        mapping: dict[str, Any] = {}
        while True:
            key_event = get_event()
            if type(key_event) is yaml.MappingEndEvent:
                return mapping
            if (
                plain
                and type(key_event) is scalar_event
                and key_event.anchor is None
                and key_event.tag is None
                and self.nodes < max_nodes
                and (
                    not key_event.implicit[0]
                    or key_event.value[:1] not in may_resolve
                    or key_event.value in resolved
                )
            ):
                self.nodes += 1
                key = key_event.value
            else:
                key = self._key(key_event, depth + 1)
            if key in mapping:
                raise self.fail(f"duplicate key {key!r}", key_event)
            value_event = get_event()
            if (
                plain
                and type(value_event) is scalar_event
                and value_event.anchor is None
                and value_event.tag is None
                and self.nodes < max_nodes
            ):
                self.nodes += 1
                value = value_event.value
                if value_event.implicit[0] and value[:1] in may_resolve:
                    known = resolved.get(value, _UNRESOLVED)
                    value = self._scalar(value_event) if known is _UNRESOLVED else known
                mapping[key] = value
            else:
                mapping[key] = self._value(value_event, depth + 1)

    def _key(self, event: Any, depth: int) -> str:
        if type(event) is not yaml.ScalarEvent:
            self._value(event, depth)  # an alias, anchor or bound is reported first, as for values
            raise self.fail("a mapping key must be a string", event)
        self._count(event)
        # Kubernetes reads YAML as JSON: every key is a string (`1: a` has key "1"); the scalar is
        # still checked as a value would be (`.inf: a` is refused).
        self._scalar(event)
        return str(event.value)

    def _scalar(self, event: Any) -> Any:
        value: str = event.value
        if self.check_surrogates:
            found = _SURROGATE.search(value)
            if found:
                raise self.fail(
                    f"not valid Unicode: lone surrogate U+{ord(found.group()):04X}", event
                )
        if event.tag is None:
            if not event.implicit[0]:
                return value  # quoted: always a string
            if value[:1] not in self.may_resolve:
                return value
            known = self.resolved.get(value, _UNRESOLVED)
            if known is not _UNRESOLVED:
                return known
            result = self._resolve_scalar(event)
            if len(self.resolved) < _RESOLVED_CACHE_SIZE:
                self.resolved[value] = result
            return result
        return self._resolve_scalar(event)

    def _resolve_scalar(self, event: Any) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _TIMESTAMP_TAG:
            tag = _STR_TAG
        if tag not in _SCALAR_TAGS:
            raise self.fail(f"YAML tag {tag} has no JSON meaning", event)
        if tag == _FLOAT_TAG and _NOT_FINITE.match(event.value):
            raise self.fail(f"{event.value} is not a JSON number", event)
        if tag == _STR_TAG:
            return event.value
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        return self.yaml_constructors[tag](self, node)

    def _collection_tag(self, event: Any, kind: type[Any], expected: str) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(kind, None, event.implicit)
        if tag != expected:
            raise self.fail(f"YAML tag {tag} has no JSON meaning", event)
        return str(tag)


_UNRESOLVED = object()
_RESOLVED_CACHE_SIZE = 100_000


# The same composer over PyYAML's pure-Python parser, as used where libyaml is missing.
PurePythonLoader: Any = type(
    "PurePythonLoader",
    (yaml.SafeLoader,),
    {
        **{k: v for k, v in vars(_Loader).items() if not k.startswith("__")},
        "__init__": _Loader.__init__,
        "parser": yaml.SafeLoader,
    },
)


def _load_yaml(
    text: str, *, source: str, limits: Limits, loader_class: Any = _Loader
) -> Iterator[Document]:
    loader = loader_class(text, source=source, limits=limits)
    yield from _yaml_errors(loader, loader.documents(), source=source, limits=limits)


def yaml_objects(
    text: str, *, source: str = "", limits: Limits = DEFAULT_LIMITS, loader_class: Any = None
) -> Iterator[tuple[int, str, Any]]:
    """(document index, path, object) of a YAML stream; a List's items built one at a time."""
    loader = (loader_class or _Loader)(text, source=source, limits=limits)
    yield from _yaml_errors(loader, loader.objects(), source=source, limits=limits)


def _yaml_errors(
    loader: Any, values: Iterator[Any], *, source: str, limits: Limits
) -> Iterator[Any]:
    """`values`, with the parser's errors turned into DocumentErrors naming document and line."""
    try:
        yield from values
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        column = f", column {mark.column + 1}" if mark is not None else ""
        raise DocumentError(
            f"invalid YAML{column}: {problem}",
            source=source,
            document=max(loader.document_index, 1),
            line=mark.line + 1 if mark is not None else None,
        ) from exc
    except yaml.YAMLError as exc:
        raise DocumentError(
            f"invalid YAML: {str(exc).splitlines()[0]}",
            source=source,
            document=max(loader.document_index, 1),
        ) from exc
    except RecursionError as exc:  # only reachable with a tiny recursion limit
        raise DocumentError(f"nested deeper than {limits.max_depth} levels", source=source) from exc
    finally:
        loader.dispose()


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


IMPORTED_UID_NAMESPACE = uuid.UUID("6f1c3f0e-2b8a-5d7e-9c41-8a7d2e5b0c13")
"""uuid5 namespace of the uids given to hand-written objects that have none."""


def stable_uid(*, kind: str, namespace: str, name: str) -> str:
    """A uid for an object written without one, the same on every import of it."""
    return str(uuid.uuid5(IMPORTED_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def dump_yaml(data: Any, stream: IO[str] | None = None, **options: Any) -> str | None:
    """YAML in block style keeping key order, through libyaml when present."""
    options.setdefault("sort_keys", False)
    options.setdefault("default_flow_style", False)
    options.setdefault("allow_unicode", True)
    result: str | None = yaml.dump(data, stream, Dumper=SafeDumper, **options)
    return result
