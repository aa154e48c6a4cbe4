"""The objects of one input, one at a time: what a snapshot import reads.

`load_documents` builds each document whole; a JSON snapshot is one document, a `List` whose
`items` hold the whole cluster, so building it whole holds every object at once (a 200 MB file
becomes over a GB of Python values). `iter_objects` reads a `List` item by item from the
text instead, with the same bounds and messages as `load_documents`: each item is built,
checked (depth, the input's running count of values, lone surrogates) and handed out before the
next is read. JSON is walked here; YAML by the bounded loader's `objects()`
(`documents.yaml_objects`). Other JSON values (an array, an object with `items` before `kind`)
are read by `load_documents` and `list_items`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from dralib.kube.documents import (
    DEFAULT_LIMITS,
    DocumentError,
    Limits,
    check_value,
    count_values,
    decode,
    json_problem,
    list_items,
    load_documents,
    yaml_objects,
)

_SPACE = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _JsonReader:
    """Walks the top level of one JSON object, building values one at a time."""

    def __init__(self, text: str, *, source: str, limits: Limits) -> None:
        self.text = text
        self.source = source
        self.limits = limits
        self.decoder = json.JSONDecoder(parse_constant=_reject_constant)
        self.nodes = 1  # the document itself
        self.end = 0  # where the structure read last ends
        # Strings need a visit only when the text may hold a lone surrogate (as in documents).
        # `decode` refused the text if it held one itself, so only an escape can make one; the
        # plain searches for its start are a pass of the C string search, the pattern's a slower
        # one, run only when they find something.
        self.check_strings = ("\\ud" in text or "\\uD" in text) and bool(
            _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text)
        )

    def skip(self, index: int) -> int:
        match = _SPACE.match(self.text, index)
        return match.end() if match else index

    def expect(self, index: int, char: str) -> int:
        index = self.skip(index)
        if self.text[index : index + 1] != char:
            found = self.text[index : index + 1] or "end of input"
            raise self.problem(index, f"expected {char!r}, found {found!r}")
        return index + 1

    def problem(self, index: int, message: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(message, self.text, index)

    def value(self, index: int, depth: int) -> tuple[Any, int]:
        """The value at `index` (at nesting `depth`), checked and counted, and where it ends."""
        value, end = self.decoder.raw_decode(self.text, self.skip(index))
        self.check(value, depth)
        return value, end

    def check(self, value: Any, depth: int) -> None:
        if self.check_strings:
            budget = self.limits.max_nodes - self.nodes + 1
            check_value(
                value,
                source=self.source,
                limits=Limits(max_depth=self.limits.max_depth - depth + 1, max_nodes=budget),
            )
        self.nodes += count_values(value, depth=depth, source=self.source, limits=self.limits)
        if self.nodes > self.limits.max_nodes:
            raise DocumentError(f"more than {self.limits.max_nodes} values", source=self.source)


def _json_list(reader: _JsonReader, start: int) -> Iterator[tuple[str, Any]]:
    """(path, item) of the JSON object at `start`; items streamed once `kind` says List.

    Keys before `items` are built as they come. When `kind` is known and names a list by then
    (as `kubectl` and every serializer write it), the items are built and handed out one by
    one; otherwise (`items` before `kind`, or an object that merely has an `items` field) the
    object is built whole and read by `list_items`, as `load_documents` would.
    """
    text = reader.text
    head: dict[str, Any] = {}
    index = reader.skip(start + 1)
    streamed = False
    first = True
    while True:
        index = reader.skip(index)
        if text[index : index + 1] == "}":
            index += 1
            break
        if not first:
            index = reader.expect(index, ",")
        first = False
        key, index = reader.decoder.raw_decode(text, reader.skip(index))
        if not isinstance(key, str):
            raise reader.problem(index, "Expecting property name enclosed in double quotes")
        index = reader.expect(index, ":")
        kind = head.get("kind")
        # A typed list's items take its apiVersion: stream them only once it is known.
        listed = (
            isinstance(kind, str)
            and kind.endswith("List")
            and (kind == "List" or "apiVersion" in head)
        )
        index = reader.skip(index)
        if key == "items" and listed and not streamed and text[index : index + 1] == "[":
            streamed = True
            yield from _json_items(reader, index, head)
            index = reader.end
            continue
        value, index = reader.value(index, 2)
        if streamed and key in ("items", "kind", "apiVersion"):
            # A repeated key: json.loads keeps the last, but the items are already read.
            raise DocumentError(f"{key}: given twice", source=reader.source)
        head[key] = value
    reader.end = index
    if not streamed:
        yield from list_items(head, consume=True)


def _json_items(reader: _JsonReader, start: int, head: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    text = reader.text
    kind = str(head["kind"])
    index = reader.skip(start + 1)
    position = 0
    while True:
        index = reader.skip(index)
        if text[index : index + 1] == "]":
            reader.end = index + 1
            return
        if position:
            index = reader.expect(index, ",")
        item, index = reader.value(index, 3)
        if isinstance(item, dict) and "kind" not in item and kind != "List":
            item = {"apiVersion": head.get("apiVersion"), "kind": kind[:-4], **item}
        yield f"items[{position}]", item
        position += 1


def iter_objects(
    data: str | bytes, *, source: str = "", limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[int, str, Any]]:
    """(document index, path in the document, object) for every object of one input.

    Paths are `list_items`'s (`items[3]`, "" for a document that is one object). The input's
    errors are `DocumentError`s, as from `load_documents`; a JSON syntax error found after some
    items were handed out is reported as such, not retried as YAML.
    """
    text = decode(data, source=source, limits=limits)
    del data
    stripped_at = _SPACE.match(text).end()  # type: ignore[union-attr]
    first = text[stripped_at : stripped_at + 1]
    if first == "[":
        yield from _from_documents(text, source=source, limits=limits)
        return
    if first != "{":
        yield from yaml_objects(text, source=source, limits=limits)
        return
    reader = _JsonReader(text, source=source, limits=limits)
    handed_out = False
    try:
        for path, item in _json_list(reader, stripped_at):
            handed_out = True
            yield 1, path, item
        if reader.skip(reader.end) != len(text):
            raise reader.problem(reader.skip(reader.end), "Extra data")
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        if isinstance(exc, DocumentError):
            if exc.source:
                raise
            # list_items' complaint about the document's own shape
            raise DocumentError(exc.reason, source=source, document=1) from exc
        if handed_out:
            raise json_problem(exc, source=source, limits=limits) from exc
        # Flow-style YAML (`{a: 1}`) starts the same way; load_documents reads it (or names
        # the JSON problem when it is no YAML either).
        del reader
        yield from _from_documents(text, source=source, limits=limits)


def _from_documents(text: str, *, source: str, limits: Limits) -> Iterator[tuple[int, str, Any]]:
    for document in load_documents(text, source=source, limits=limits):
        try:
            for path, item in list_items(document.value, consume=True):
                yield document.index, path, item
        except DocumentError as exc:
            raise DocumentError(exc.reason, source=source, document=document.index) from exc
