"""`iter_objects`: a JSON List read item by item, with `load_documents`' bounds and messages."""

from __future__ import annotations

import json

import pytest

from dralib.kube.documents import DocumentError, Limits, list_items, load_documents
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
