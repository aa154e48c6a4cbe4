"""YAML text into values, built straight from libyaml's (or PyYAML's) parser events, within bounds.

No node tree is composed and no constructor pass runs: each value is built as its events come, so
the limits apply before anything is built, aliases and anchors are refused where they appear, and
a `List` document's items are handed out one at a time. libyaml's own composer recurses in C and
crashes the process on deeply nested input, so it is never used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from dralib.kube.bounds import (
    _SURROGATE,
    DEFAULT_LIMITS,
    Document,
    DocumentError,
    Limits,
    list_items,
)

# CSafeLoader is PyYAML's libyaml binding; absent when PyYAML was built without it.
_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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
