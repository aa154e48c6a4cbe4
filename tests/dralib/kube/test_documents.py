"""The bounded parser of user input: what it accepts, what it refuses quickly, and where it says."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any

import pytest
import yaml

from dralib.kube import documents
from dralib.kube.documents import (
    DocumentError,
    Limits,
    PurePythonLoader,
    _check_json,
    check_value,
    dump_yaml,
    list_items,
    load_documents,
    stable_uid,
)

LOADERS = pytest.mark.parametrize("loader", [None, PurePythonLoader], ids=["libyaml", "python"])

BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def counting(loader: Any) -> tuple[Any, list[int]]:
    """`loader` (None: the default one) counting the YAML parser events it reads."""
    read = [0]

    class Counting(loader or documents._Loader):  # type: ignore[misc]
        def get_event(self) -> Any:
            read[0] += 1
            return super().get_event()

    return Counting, read


def _values(text: str | bytes, **options: Any) -> list[Any]:
    return [document.value for document in load_documents(text, source="f.yaml", **options)]


def _error(text: str | bytes, **options: Any) -> DocumentError:
    with pytest.raises(DocumentError) as raised:
        _values(text, **options)
    return raised.value


@LOADERS
def test_multi_document_stream_keeps_index_and_line(loader: Any) -> None:
    """Empty documents are skipped but still counted; each knows its first line (its `---`)."""
    text = "a: 1\n---\n---\nkind: Pod\nmetadata: {name: p}\n"
    documents = list(load_documents(text, loader_class=loader))
    assert [(d.index, d.line) for d in documents] == [(1, 1), (3, 3)]
    assert documents[1].value == {"kind": "Pod", "metadata": {"name": "p"}}


@LOADERS
def test_scalars_read_as_kubernetes_reads_them(loader: Any) -> None:
    """Timestamps stay strings and integer keys become strings, as YAML-to-JSON makes them."""
    value = _values(
        "t: 2025-10-02T08:30:00Z\n1: one\nn: [1, 2.5, true, null]\n", loader_class=loader
    )
    assert value == [{"t": "2025-10-02T08:30:00Z", "1": "one", "n": [1, 2.5, True, None]}]


class _TimestampsAsText(yaml.SafeLoader):
    """PyYAML's safe loader with timestamps kept as text, as the dashboard reads them."""


_TimestampsAsText.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)

SCALAR_ZOO = """\
plain: [yes, no, on, off, y, n, true, False, TRUE, ~, null, Null, "", '']
numbers: [0, -1, +7, 1_000, 0x1F, 0o17, 017, 0b101, 190:20:30, 1.5e3, .5, -2.5, 6.8523015e+5]
strings: [gpu-0, nvidia.com/gpu, "1", '2.5', "true", "=", t0, 0.0.1, 1.2.3-rc.1, 2001-12-14, 08]
tagged: [!!str 12, !!int "12", !!float "1", !!bool "true", !!null "", ! 12, ! "x"]
repeated: [1, 1, true, true, on, on, 0x10, 0x10, "1", "1"]
folded: >
  a
  b
literal: |
  x: 1
"1": key-is-text
2.5: float-key
true: bool-key
null: null-key
nested: {a: [1, {b: [yes, "no"]}], c: {}}
"""


@LOADERS
def test_values_equal_pyyaml_safe_load(loader: Any) -> None:
    """Built straight from events, every scalar reads as PyYAML's safe loader reads it.

    Plain scalars are resolved once per distinct text, so repeats are in the input too.
    Keys are the one difference: Kubernetes makes every key a string.
    """
    expected = yaml.load(SCALAR_ZOO, Loader=_TimestampsAsText)
    as_text = {True: "true", None: "null"}
    expected = {as_text.get(key, str(key)): value for key, value in expected.items()}
    assert _values(SCALAR_ZOO, loader_class=loader) == [expected]
    value = _values(SCALAR_ZOO, loader_class=loader)[0]
    assert [type(item) for item in value["repeated"]] == [int, int, bool, bool, bool, bool] + [
        int,
        int,
        str,
        str,
    ]
    assert list(value)[-5:] == ["1", "2.5", "true", "null", "nested"]


def test_json_is_parsed_as_json() -> None:
    """A JSON document goes through json.loads; flow-style YAML still parses as YAML."""
    assert _values('{"kind": "List", "items": []}') == [{"kind": "List", "items": []}]
    assert _values("{kind: Pod}") == [{"kind": "Pod"}]


@LOADERS
def test_billion_laughs_is_refused_quickly(loader: Any) -> None:
    """A few hundred bytes of nested aliases are refused at the first anchor, not expanded."""
    assert len(BILLION_LAUGHS) < 700
    loader, events = counting(loader)
    error = _error(BILLION_LAUGHS, loader_class=loader)
    assert events[0] <= 5  # stream, document, mapping, key, and the anchored value
    assert "anchor &a is not supported" in str(error)
    assert (error.document, error.line) == (1, 1)


@LOADERS
def test_alias_is_refused_with_its_line(loader: Any) -> None:
    """Even a single alias is refused, naming the line where it is."""
    error = _error("a: 1\nb: *x\n", loader_class=loader)
    assert error.line == 2
    assert "alias" in error.reason


@LOADERS
@pytest.mark.parametrize("depth", [65, 200_000])
def test_deep_yaml_nesting_is_refused_quickly(loader: Any, depth: int) -> None:
    """Nesting past the bound stops the parser at the bound, however deep the input goes."""
    loader, events = counting(loader)
    error = _error("[" * depth + "]" * depth, loader_class=loader)
    assert events[0] <= 2 + 65  # stream and document start, then one event per level
    assert "nested deeper than 64 levels" in str(error)


def test_nesting_at_the_bound_is_accepted() -> None:
    """Exactly `max_depth` levels parse; one more does not."""
    assert _values("[" * 64 + "]" * 64)
    assert "nested deeper" in _error('{"a": ' * 65 + "1" + "}" * 65).reason


def test_deep_json_is_refused() -> None:
    """JSON nested past the recursion limit is an error, not a RecursionError."""
    depth = 100_000
    assert "nested deeper" in _error("[" * depth + "]" * depth).reason


@LOADERS
def test_total_values_are_bounded(loader: Any) -> None:
    """More values than `max_nodes` is refused, in YAML and JSON alike."""
    limits = Limits(max_nodes=10)
    assert "more than 10 values" in _error("[" + ", ".join(["1"] * 20) + "]", limits=limits).reason
    assert "more than 10 values" in _error("- 1\n" * 20, limits=limits, loader_class=loader).reason


def test_input_bytes_are_bounded_before_parsing() -> None:
    """Text or bytes over `max_bytes` are refused with both sizes in the message."""
    limits = Limits(max_bytes=1024)
    assert "more than the limit of 1.0 KiB" in _error("a: " + "x" * 2000, limits=limits).reason
    assert "more than the limit" in _error(b"a: " + b"x" * 2000, limits=limits).reason
    # Multi-byte characters count as their UTF-8 bytes.
    assert "more than the limit" in _error("a: " + "\u00e9" * 600, limits=limits).reason


def test_documents_are_bounded() -> None:
    """A stream with more documents than allowed is refused."""
    assert (
        "more than 3 documents" in _error("a: 1\n---\n" * 5, limits=Limits(max_documents=3)).reason
    )


def test_invalid_utf8_names_the_line() -> None:
    """Bytes that are not UTF-8 are refused with the offset and line of the first bad byte."""
    error = _error(b"a: 1\nb: \xff\n")
    assert error.line == 2
    assert "not UTF-8" in error.reason
    assert "offset 8" in error.reason


def test_bom_is_dropped() -> None:
    """A UTF-8 byte order mark (some editors write one) is not part of the first key."""
    assert _values(b"\xef\xbb\xbfa: 1\n") == [{"a": 1}]


@pytest.mark.parametrize(
    "text",
    ["a: \ud800\n", '{"a": "\\ud800"}', '{"\\udc00": 1}'],
    ids=["raw-text", "json-escape", "json-key"],
)
def test_lone_surrogates_are_refused(text: str) -> None:
    """Lone surrogates (which cannot be stored or encoded) are refused, raw or escaped."""
    assert "lone surrogate" in _error(text).reason


def test_lone_surrogate_escape_in_python_yaml_is_refused() -> None:
    """PyYAML's own parser accepts `\\ud800` escapes; the composer refuses them."""
    assert "lone surrogate" in _error('a: "\\ud800"\n', loader_class=PurePythonLoader).reason


@LOADERS
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: !!binary aGk=\n", "has no JSON meaning"),
        ("a: !!set {x: null}\n", "has no JSON meaning"),
        ("a: .nan\n", "not a JSON number"),
        ("a: -.inf\n", "not a JSON number"),
        ("? [a]\n: x\n", "mapping key must be a string"),
        ("a: [1\n", "invalid YAML"),
    ],
)
def test_yaml_without_a_json_meaning_is_refused(loader: Any, text: str, reason: str) -> None:
    """Duplicate keys, non-JSON tags, NaN and complex keys are errors with a document index."""
    error = _error(text, loader_class=loader)
    assert reason in error.reason
    assert error.document == 1
    assert error.line is not None


def test_json_nan_is_not_a_number() -> None:
    """JSON's non-standard NaN is not read as a float."""
    assert _values('{"a": NaN}') == [{"a": "NaN"}]


def test_error_message_names_source_document_and_line() -> None:
    """The message starts with where: file, document, line."""
    error = _error("a: 1\n---\nb: [1\n")
    assert str(error).startswith("f.yaml document 2 line ")
    assert error.source == "f.yaml"


def test_error_survives_pickling() -> None:
    """A DocumentError crosses process boundaries (Celery) intact."""
    error = DocumentError("bad", source="f.yaml", document=2, line=3)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, copy.source, copy.document, copy.line) == ("bad", "f.yaml", 2, 3)
    assert str(copy) == "f.yaml document 2 line 3: bad"


def test_check_value_bounds_objects_handed_over() -> None:
    """Already parsed objects get the same depth and string checks."""
    nested: Any = "x"
    for _ in range(70):
        nested = [nested]
    with pytest.raises(DocumentError, match="nested deeper"):
        check_value(nested)
    with pytest.raises(DocumentError, match="lone surrogate"):
        check_value({"a": ("\udfff",)})
    shared: Any = ["x"]
    for _ in range(40):
        shared = [shared, shared]
    with pytest.raises(DocumentError, match="more than 1000 values"):
        check_value(shared, limits=Limits(max_nodes=1000))
    check_value({"a": [{"b": "ok"}], 1: None})


def test_list_items_expands_lists() -> None:
    """`kind: List`, typed lists (items without kind) and bare arrays yield their items."""
    plain = {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]}
    assert list(list_items(plain)) == [("items[0]", {"kind": "Node"})]
    typed = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "items": [{}]}
    assert list(list_items(typed)) == [
        ("items[0]", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"})
    ]
    assert list(list_items([{"kind": "Pod"}])) == [("[0]", {"kind": "Pod"})]
    assert list(list_items({"kind": "Pod"})) == [("", {"kind": "Pod"})]
    with pytest.raises(DocumentError, match="items: expected a list"):
        list(list_items({"kind": "List", "items": {"a": 1}}))


def test_dump_yaml_round_trips_in_block_style() -> None:
    """dump_yaml keeps key order and block style, and its output parses back unchanged."""
    data = {"kind": "List", "apiVersion": "v1", "items": [{"b": 1, "a": "é\nline"}]}
    text = dump_yaml(data)
    assert text is not None
    assert text.startswith("kind: List\napiVersion: v1\n")
    assert _values(text) == [data]
    out = io.StringIO()
    dump_yaml(data, out)
    assert yaml.safe_load(out.getvalue()) == data


def test_dump_yaml_writes_shared_values_out_so_the_reader_takes_them() -> None:
    """A map met twice is written twice, not as `&id001`/`*id001` the reader would refuse."""
    attributes = {"model": {"string": "A100"}}
    devices = [{"name": f"gpu-{i}", "attributes": attributes} for i in range(2)]
    text = dump_yaml({"devices": devices})
    assert text is not None and "&" not in text and "*" not in text
    assert _values(text) == [{"devices": devices}]


def test_stable_uid_is_stable_and_distinct() -> None:
    """The uid of a hand-written object depends only on kind, namespace and name."""
    first = stable_uid(kind="ResourceClaim", namespace="ns", name="c")
    assert first == stable_uid(kind="ResourceClaim", namespace="ns", name="c")
    assert first != stable_uid(kind="ResourceClaim", namespace="other", name="c")
    assert len(first) == 36


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}',  # a surrogate pair; an escaped backslash
        '{"a": "\\ud800"}',
        '"\\udfff"',
        "[" * 40 + "]" * 40,
        "[" * 80 + "]" * 80,
        '{"a": {"b": {"c": [1, 2, 3]}}}',
        "[" + ", ".join(["[1, 2, 3]"] * 400) + "]",
        '{"n": 12345678901234567890123, "s": "plain"}',
    ],
)
def test_json_fast_check_agrees_with_the_full_check(text: str) -> None:
    """JSON is checked by walking its containers only; it refuses and accepts what the full
    check does, with the same message."""
    limits = Limits(max_depth=64, max_nodes=1000)
    value = json.loads(text)
    outcomes = []
    for check in (
        lambda: _check_json(value, text, source="s", limits=limits),
        lambda: check_value(value, source="s", limits=limits),
    ):
        try:
            check()
            outcomes.append(None)
        except DocumentError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


# Mappings whose plain keys and values the builder takes without its general path, and what
# that path refuses: every case is read both ways and must come out the same.
FAST_PATH_CASES = [
    "name: n\nnamespace: ns\nnodeName: x\nyes: 1\n'on': off\nnull: ~\ntrue: false\n",
    "a: 1\nb: 0x10\nc: 1e3\nd: 2026-01-02T08:00:00Z\ne: '007'\nf: \"y\"\ng: .5\nh: -1\n",
    "a: {b: [1, {c: d}], e: {}}\nf: []\n",
    "a: 1\na: 2\n",
    "a: !!binary aGk=\n",
    "!!str a: b\n",
    "a: &x 1\n",
    "&x a: 1\n",
    "a: .nan\n",
    ".inf: a\n",
    "? [a]\n: x\n",
    "a: {b: {c: {d: {e: 1}}}}\n",
    "a: b\nc: d\ne: f\ng: h\n",
]


@LOADERS
@pytest.mark.parametrize("text", FAST_PATH_CASES)
@pytest.mark.parametrize("max_nodes", [3, 4, 5, 7, 9, 100])
def test_plain_scalar_shortcut_reads_as_the_general_path(
    loader: Any, text: str, max_nodes: int
) -> None:
    """A mapping read through the plain-scalar shortcut gives the value, or the error (same
    reason and line), that the general path gives: a backslash in a comment turns the
    shortcut off for the whole input."""
    limits = Limits(max_nodes=max_nodes, max_depth=4)
    general = text + "# \\\\ turns the shortcut off\n"
    outcomes = []
    for given in (text, general):
        try:
            outcomes.append(_values(given, loader_class=loader, limits=limits))
        except DocumentError as exc:
            outcomes.append((exc.reason, exc.line))
    assert outcomes[0] == outcomes[1]


@LOADERS
def test_plain_keys_skip_the_general_path(loader: Any) -> None:
    """Plain keys (resolvable ones once resolved) are taken without `_key`; with the shortcut
    off, every key goes through it."""
    calls = [0]

    class Counting(loader or documents._Loader):  # type: ignore[misc]
        def _key(self, event: Any, depth: int) -> str:
            calls[0] += 1
            return super()._key(event, depth)

    text = "".join(f"- {{name: n{i}, uid: u{i}, 'q': x}}\n" for i in range(50))
    assert len(_values(text, loader_class=Counting)[0]) == 50
    # "name" starts like "null"/"no": resolved once, then taken from the cache.
    assert calls[0] == 1
    calls[0] = 0
    _values(text + "# \\\n", loader_class=Counting)
    assert calls[0] == 150
