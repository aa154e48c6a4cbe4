"""The objects of one input, one at a time: what a snapshot import reads.

`load_documents` builds each document whole; a JSON snapshot is one document, a `List` whose
`items` hold the whole cluster, so building it whole holds every object at once (a 200 MB file
becomes over a GB of Python values). `iter_objects` reads a `List` item by item from the
text instead, with the same bounds and messages as `load_documents`: each item is built,
checked (depth, the input's running count of values, lone surrogates) and handed out before the
next is read. JSON is walked here; YAML by the bounded loader's `objects()`
(`documents.yaml_objects`). Other JSON values (an array, an object with `items` before `kind`)
are read by `load_documents` and `list_items`.

A JSON List's items are decoded by orjson a batch at a time (`_JsonReader.batch`): the json
module's decoder was a tenth of a snapshot import. orjson reads one value, not one of many
in a text, so a batch is the text from an item's start to a candidate end, parsed as an array:
where that parses, the candidate is an item's end (a prefix of the real parse, closed at the
items' level); where it does not, or orjson would read the values differently (an integer past
64 bits, an escaped surrogate), the items are read one at a time as before, with the same
errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import orjson

from dralib.kube.bounds import integers_fit_orjson
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
# An object's opening brace and its first key, as an item of a List starts.
_FIRST_KEY = re.compile(r'\{[ \t\n\r]*"[^"\\]*"')

BATCH_CHARS = 32 * 1024
"""About how much text of a List's items one orjson call decodes. Small enough that the items
it makes are still in the CPU's cache when they are checked and handed out: at 1 MiB, reading
a 5,000-node snapshot took more CPU than item by item."""
# Batches in a row that could not be decoded before the items are read one at a time to the
# end: each failed try costs a parse of its text, and a layout that fools the guess keeps
# fooling it.
_MISSES_ALLOWED = 8


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
        # one, run only when they find something; a text without any \u escape (most
        # snapshots) is passed over once.
        self.check_strings = (
            "\\u" in text
            and ("\\ud" in text or "\\uD" in text)
            and bool(_SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text))
        )
        # What separates two items, from the end of one to the first key of the next, as the
        # first two items show it; None until then, or when batches are not to be tried.
        self.separator: str | None = None
        self.misses = 0

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

    def learn_separator(self, first: int, end: int, second: int) -> None:
        """Note what separates two items, the first from `first` to `end`, the second starting
        at `second`, when both start with the same key (every kubectl or json.dumps List)."""
        key = _FIRST_KEY.match(self.text, first)
        if key is None or self.check_strings:
            return
        if self.text.startswith(key.group(), second):
            self.separator = self.text[end - 1 : second] + key.group()

    def batch(self, index: int, depth: int) -> tuple[list[Any], int] | None:
        """The items from `index` (an item's start) to an item's end about BATCH_CHARS on,
        decoded by one orjson call, and where the last ends; None when that cannot be done,
        and the caller reads the next item alone. The items are not checked yet (`check`)."""
        separator = self.separator
        if separator is None or self.misses >= _MISSES_ALLOWED:
            return None
        text = self.text
        # The closing brace of an item is the separator's first character. A candidate found
        # inside an item (the separator repeated by a nested list) does not parse: the next
        # one is tried, and after a few the items are read one by one.
        candidate = text.find(separator, index + BATCH_CHARS)
        # Near the end of the list, the last candidate, then earlier ones.
        backwards = candidate < 0
        if backwards:
            candidate = text.rfind(separator, index)
        for _ in range(3):
            if candidate < 0:
                break
            part = text[index : candidate + 1]
            data = f"[{part}]".encode()
            del part
            if not integers_fit_orjson(data):
                break
            try:
                items = orjson.loads(data)
            except orjson.JSONDecodeError:
                if backwards:
                    candidate = text.rfind(separator, index, candidate)
                else:
                    candidate = text.find(separator, candidate + 1)
                continue
            self.misses = 0
            return items, candidate + 1
        self.misses += 1
        return None

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
    first = first_end = 0
    while True:
        index = reader.skip(index)
        if text[index : index + 1] == "]":
            reader.end = index + 1
            return
        if position:
            index = reader.expect(index, ",")
            index = reader.skip(index)
            if position == 1:
                reader.learn_separator(first, first_end, index)
        batch = reader.batch(index, 3) if position > 1 else None
        if batch is None:
            if not position:
                first = reader.skip(index)
            item, index = reader.value(index, 3)
            if not position:
                first_end = index
            items = [item]
            del item
        else:
            items, index = batch
        # Handed out one by one, each checked just before and let go of here after.
        items.reverse()
        while items:
            item = items.pop()
            if batch is not None:
                reader.check(item, 3)
            if isinstance(item, dict) and "kind" not in item and kind != "List":
                item = {"apiVersion": head.get("apiVersion"), "kind": kind[:-4], **item}
            yield f"items[{position}]", item
            del item
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
