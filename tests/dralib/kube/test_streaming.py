"""`iter_objects`: a JSON List read item by item, with `load_documents`' bounds and messages."""

from __future__ import annotations

import json

import pytest

from dralib.kube import streaming
from dralib.kube.documents import (
    DocumentError,
    Limits,
    count_values,
    list_items,
    load_documents,
)
from dralib.kube.streaming import iter_objects


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_items_come_out_one_at_a_time_before_the_rest_is_read() -> None:
    """The first item is handed out while a later one is still unread (broken, even)."""
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [_node("a")]})
    text = text[:-2] + ', {"broken": ]}'
    objects = iter_objects(text, source="s.json")
    assert next(objects) == (1, "items[0]", _node("a"))
    with pytest.raises(DocumentError) as error:
        next(objects)
    assert str(error.value).startswith("s.json line 1: invalid JSON at column")


def test_the_same_objects_as_load_documents() -> None:
    """Typed lists fill in kind and apiVersion; keys after items are read too."""
    document = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSliceList",
        "items": [{"metadata": {"name": "s1"}}, {"metadata": {"name": "s2"}}],
        "metadata": {"resourceVersion": "7"},
    }
    text = json.dumps(document, indent=2)
    expected = [
        (d.index, path, item) for d in load_documents(text) for path, item in list_items(d.value)
    ]
    assert list(iter_objects(text)) == expected
    assert expected[1][2]["kind"] == "ResourceSlice"


@pytest.mark.parametrize(
    "text",
    [
        '{"items": [{"kind": "Node", "metadata": {"name": "a"}}], "kind": "List"}',
        '{"kind": "Node", "metadata": {"name": "a"}}',
        '[{"kind": "Node", "metadata": {"name": "a"}}]',
        "{kind: Node, metadata: {name: a}}",
        "kind: Node\nmetadata:\n  name: a\n---\nkind: Node\nmetadata:\n  name: b\n",
    ],
)
def test_every_other_shape_reads_as_load_documents_reads_it(text: str) -> None:
    """Items before kind, single objects, arrays, flow-style and block YAML."""
    expected = [
        (d.index, path, item) for d in load_documents(text) for path, item in list_items(d.value)
    ]
    assert expected
    assert list(iter_objects(text)) == expected


def test_the_count_of_values_spans_the_items() -> None:
    """max_nodes bounds the whole input, not each item."""
    text = json.dumps({"kind": "List", "items": [_node(str(i)) for i in range(10)]})
    per_item = 6  # the item, apiVersion, kind, metadata, name ... counted as load_documents does
    with pytest.raises(DocumentError, match="more than 40 values"):
        list(iter_objects(text, limits=Limits(max_nodes=40)))
    assert len(list(iter_objects(text, limits=Limits(max_nodes=10 * per_item + 3)))) == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind": "List", "items": [{"a": 1}, {"a": NaN}]}', "NaN is not a JSON number"),
        ('{"kind": "List", "items": []} {}', "Extra data"),
        ('{"kind": "List", "items": [{"a": "\\ud800"}]}', r"lone surrogate U\+D800"),
        ('{"kind": "List", "items": [' + '{"a": ' * 70 + "1" + "}" * 70 + "]}", "nested deeper"),
        ('{"kind": "List", "items": [1], "kind": "X"}', "kind: given twice"),
    ],
)
def test_bad_input_is_refused_with_its_reason(text: str, message: str) -> None:
    """NaN, trailing data, lone surrogates, depth and a repeated key are refused."""
    with pytest.raises(DocumentError, match=message):
        list(iter_objects(text, source="s.json"))


def test_a_yaml_list_comes_out_one_item_at_a_time() -> None:
    """The first item of a YAML List is handed out before a broken later one is parsed."""
    text = "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n- [\n"
    objects = iter_objects(text, source="s.yaml")
    assert next(objects) == (1, "items[0]", {"kind": "Node", "metadata": {"name": "a"}})
    with pytest.raises(DocumentError, match=r"^s\.yaml document 1 line \d+: invalid YAML"):
        next(objects)


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSliceList\nitems:\n"
        "- metadata: {name: s1}\n- metadata: {name: s2}\nmetadata: {resourceVersion: '7'}\n",
        "kind: ResourceSliceList\nitems:\n- metadata: {name: s1}\napiVersion: resource.k8s.io/v1\n",
        "kind: List\nitems: []\n---\n\n---\nkind: Node\nmetadata: {name: b}\n",
    ],
)
def test_yaml_lists_read_as_load_documents_reads_them(text: str) -> None:
    """Typed lists (apiVersion before or after the items), empty lists and documents."""
    expected = [
        (d.index, path, item) for d in load_documents(text) for path, item in list_items(d.value)
    ]
    assert list(iter_objects(text)) == expected


def test_a_yaml_list_keeps_the_bounds() -> None:
    """Duplicate items, aliases and the count of values are refused while streaming."""
    with pytest.raises(DocumentError, match="duplicate key 'items'"):
        list(iter_objects("kind: List\nitems: []\nitems: []\n"))
    with pytest.raises(DocumentError, match="anchor"):
        list(iter_objects("kind: List\nitems:\n- &a {kind: Node}\n- *a\n"))
    many = "kind: List\nitems:\n" + "".join(f"- {{kind: Node, n: {i}}}\n" for i in range(10))
    with pytest.raises(DocumentError, match="more than 25 values"):
        list(iter_objects(many, limits=Limits(max_nodes=25)))


def _pods(count: int, **extra: object) -> list[dict[str, object]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"p{i}",
                # Entries that start as the items do: the separator repeated inside an item.
                "managedFields": [{"apiVersion": "v1", "n": 1}, {"apiVersion": "v1", "n": 2}],
            },
            **extra,
        }
        for i in range(count)
    ]


class _CountingDecoder(json.JSONDecoder):
    """The json module's decoder, counting the values it is asked to decode."""

    calls = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[object, int]:
        type(self).calls += 1
        return super().raw_decode(s, idx)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> type[_CountingDecoder]:
    """Batches of a few items, and the json decoder's values counted."""
    monkeypatch.setattr(streaming, "BATCH_CHARS", 600)
    monkeypatch.setattr(streaming.json, "JSONDecoder", _CountingDecoder)
    _CountingDecoder.calls = 0
    return _CountingDecoder


@pytest.mark.parametrize("indent", [None, 4])
def test_items_are_decoded_in_batches_as_the_json_module_reads_them(
    small_batches: type[_CountingDecoder], indent: int | None
) -> None:
    """200 items, compact or indented as kubectl writes them: the same objects as json.loads,
    the json module decoding only the list's keys, its first two items and its last."""
    document = {"apiVersion": "v1", "kind": "List", "items": _pods(200), "metadata": {}}
    text = json.dumps(document, indent=indent)
    objects = list(iter_objects(text))
    assert [item for _, _, item in objects] == document["items"]
    assert [path for _, path, _ in objects] == [f"items[{i}]" for i in range(200)]
    # apiVersion, kind and their values, "items", items 0, 1 and 199, "metadata" and {}.
    assert small_batches.calls == 10


def test_integers_past_64_bits_stay_exact_in_a_batched_list(
    small_batches: type[_CountingDecoder],
) -> None:
    """orjson would read 2**64 as a float: such a batch is decoded by the json module."""
    items = _pods(50)
    items[30]["spec"] = {"big": 2**64, "negative": -(2**63) - 1}
    text = json.dumps({"kind": "List", "items": items})
    objects = [item for _, _, item in iter_objects(text)]
    assert objects == items
    assert type(objects[30]["spec"]["big"]) is int
    # Beyond the 6 values of a list without a wide integer (kind, "List", "items", items 0, 1
    # and 49): the items of the batches that hold item 30.
    assert small_batches.calls > 6


def test_a_broken_item_in_a_batched_list_is_named_as_item_by_item(
    small_batches: type[_CountingDecoder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The items before a broken one come out, then the same error as without batches."""
    text = json.dumps({"kind": "List", "items": _pods(40)})
    broken = text.replace('"name": "p33"', '"name": p33', 1)

    def read(text: str) -> tuple[int, str]:
        seen = 0
        with pytest.raises(DocumentError) as error:
            for _ in iter_objects(text, source="s.json"):
                seen += 1
        return seen, str(error.value)

    with_batches = read(broken)
    monkeypatch.setattr(streaming, "_MISSES_ALLOWED", 0)
    assert with_batches == read(broken)
    assert with_batches[0] == 33
    assert with_batches[1].startswith("s.json line 1: invalid JSON at column")


@pytest.mark.parametrize(
    ("value", "message"),
    [("\\ud800", r"lone surrogate U\+D800"), ("NaN", "NaN is not a JSON number")],
)
def test_a_batched_list_refuses_what_the_json_module_refuses(
    small_batches: type[_CountingDecoder], value: str, message: str
) -> None:
    """An escaped lone surrogate or a NaN late in the list is refused with its reason."""
    text = json.dumps({"kind": "List", "items": _pods(40)})
    text = text.replace('"name": "p35"', f'"name": "p35", "x": "{value}"'.replace('"NaN"', "NaN"))
    with pytest.raises(DocumentError, match=message):
        list(iter_objects(text, source="s.json"))


def test_the_count_of_values_spans_batches(
    small_batches: type[_CountingDecoder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """max_nodes bounds the whole input at the same count with batches as item by item."""
    document = {"kind": "List", "items": _pods(30)}
    text = json.dumps(document)
    # The reader counts what json.loads would make but the items' array itself.
    total = count_values(document, depth=1, source="", limits=Limits()) - 1
    for batches_allowed in (streaming._MISSES_ALLOWED, 0):
        monkeypatch.setattr(streaming, "_MISSES_ALLOWED", batches_allowed)
        assert len(list(iter_objects(text, limits=Limits(max_nodes=total)))) == 30
        with pytest.raises(DocumentError, match=f"more than {total - 1} values"):
            list(iter_objects(text, limits=Limits(max_nodes=total - 1)))
