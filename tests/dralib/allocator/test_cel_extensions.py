"""Tests of the CEL extensions added over cel-cpp: two-variable comprehensions and sortBy.

Expressions and expected results come from cel-go's ext/comprehensions_test.go and
ext/lists_test.go (the cases that need no other cel-go-only function).
"""

from __future__ import annotations

import pytest

from dralib.allocator.cel import MAX_COST, CELError, DeviceInput, compile_selector
from dralib.allocator.cel.macros import rewrite_macros

DEVICE = DeviceInput(
    driver="driver-a",
    attributes={
        "ids": {"ints": [3, 1, 2]},
        "names": {"strings": ["b", "a"]},
        "model": {"string": "x1"},
        "other.dev/cores": {"int": 4},
    },
    capacity={"memory": {"value": "8Gi"}},
)

COMPREHENSIONS = [
    # list.all()
    "[1, 2, 3, 4].all(i, v, i < 5 && v > 0)",
    "[1, 2, 3, 4].all(i, v, i < v)",
    "[1, 2, 3, 4].all(i, v, i > v) == false",
    """cel.bind(listA, [1, 2, 3, 4],
       cel.bind(listB, [1, 2, 3, 4, 5],
         listA.all(i, v, listB[?i].hasValue() && listB[i] == v)))""",
    """cel.bind(listA, [1, 2, 3, 4, 5, 6],
       cel.bind(listB, [1, 2, 3, 4, 5],
         listA.all(i, v, listB[?i].hasValue() && listB[i] == v))) == false""",
    # list.exists(), existsOne(), exists_one()
    """cel.bind(l, ['hello', 'world', 'hello!', 'worlds'],
       l.exists(i, v,
         v.startsWith('hello')
         && l[?(i+1)].optMap(next, next.endsWith('world')).orValue(false)))""",
    """cel.bind(l, ['hello', 'world', 'hello!', 'worlds'],
       l.existsOne(i, v,
         v.startsWith('hello')
         && l[?(i+1)].optMap(next, next.endsWith('world')).orValue(false)))""",
    """cel.bind(l, ['hello', 'goodbye', 'hello!', 'goodbye'],
       l.exists_one(i, v,
         v.startsWith('hello') && l[?(i+1)].optMap(next, next == "goodbye").orValue(false)
       )) == false""",
    # list.transformList(), transformMap(), transformMapEntry()
    "[1, 2, 3].transformList(indexVar, valueVar, (indexVar * valueVar) + valueVar) == [1, 4, 9]",
    "[1, 2, 3].transformList(indexVar, valueVar, indexVar % 2 == 0,"
    " (indexVar * valueVar) + valueVar) == [1, 9]",
    "[].transformList(i, v, v) == []",
    "[1].transformList(i, v, i) == [0]",
    "[3, 2, 1].transformList(i, v, v > i, v) == [3, 2]",
    "['Hello', 'world'].transformMap(i, v, [v.lowerAscii()]) == {0: ['hello'], 1: ['world']}",
    """['world', 'Hello'].transformMap(i, v, [v.lowerAscii()])
       .transformList(k, v, v) // extract the list back form the map
       .flatten()
       .sort() == ['hello', 'world']""",
    "[1, 2, 3].transformMap(indexVar, valueVar, (indexVar * valueVar) + valueVar)"
    " == {0: 1, 1: 4, 2: 9}",
    "[1, 2, 3].transformMap(indexVar, valueVar, indexVar % 2 == 0,"
    " (indexVar * valueVar) + valueVar) == {0: 1, 2: 9}",
    """"key1:value1 key2:value2 key3:value3".split(" ")
       .transformMapEntry(i, v,
         cel.bind(entry, v.split(":"), entry.size() == 2 ? {entry[0]: entry[1]} : {})
       ) == {'key1': 'value1', 'key2': 'value2', 'key3': 'value3'}""",
    """"key1:value1:extra key2:value2 key3".split(" ")
       .transformMapEntry(i, v, cel.bind(entry, v.split(":"), {?entry[0]: entry[?1]})
       ) == {'key1': 'value1', 'key2': 'value2'}""",
    # map.all(), exists(), existsOne(), exists_one()
    "{1: 1, 2: 2, 3: 3}.all(i, v, i < 5 && v > 0)",
    "!{0: 0}.all(i, v, i < 5 && v > 0)",
    "{'hello': 'world', 'hello!': 'world'}.all(k, v, k.startsWith('hello') && v == 'world')",
    "{'hello': 'world', 'hello!': 'worlds'}.all(k, v, k.startsWith('hello')"
    " && v.endsWith('world')) == false",
    "{'hello': 'world', 'hello!': 'worlds'}.exists(k, v, k.startsWith('hello')"
    " && v.endsWith('world'))",
    "{'hello': 'world', 'hello!': 'worlds'}.existsOne(k, v, k.startsWith('hello')"
    " && v.endsWith('world'))",
    "{'hello': 'world', 'hello!': 'wow, world'}.exists_one(k, v, k.startsWith('hello')"
    " && v.endsWith('world')) == false",
    "{'a': 'b', 'c': 'd'}.existsOne(k, v, k == 'b' || v == 'b')",
    "{'a': 'b', 'c': 'd'}.exists(k, v, k == 'b' || v == 'b')",
    # map.transformList(), transformMap(), transformMapEntry()
    "{'greeting': 'hello', 'farewell': 'goodbye'}.transformList(k, _, k).sort()"
    " == ['farewell', 'greeting']",
    "{'greeting': 'hello', 'farewell': 'goodbye'}.transformList(_, v, v).sort()"
    " == ['goodbye', 'hello']",
    "[].transformMap(k, v, v + 1) == {}",
    "{}.transformMap(k, v, v + 1) == {}",
    "{1: 2}.transformMap(k, v, v + 1) == {1: 3}",
    "{1: 2, 3: 4, 5: 6}.transformMap(k, v, k % 3 == 0, v + 1) == {3: 5}",
    "{'a': 'world', 'b': 'hello'}.transformMap(i, v, i == 'a' ? v.upperAscii() : v)"
    " == {'a': 'WORLD', 'b': 'hello'}",
    "{1: 2}.transformMapEntry(k, v, {v: k}) == {2: 1}",
    "{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, {}) == {}",
    # Nesting, chaining and the device.
    "[1, 2].exists(i, v, [3].exists(j, w, w == v + i))",
    "[[1, 2], [3]].all(i, l, l.all(j, v, v > i + j))",
    'device.attributes["driver-a"].ids.all(i, v, v > 0 && i < 3)',
    'device.attributes["driver-a"].ids.transformList(i, v, v * 2).all(i, v, v > i)',
    'device.attributes["driver-a"].exists(name, value, name == "model" && value == "x1")',
    'device.attributes["other.dev"].all(name, value, name == "cores")',
    'device.attributes["missing.dom"].all(name, value, false)',
    'device.capacity["driver-a"].exists(name, q, q.isGreaterThan(quantity("4Gi")))',
    "dyn([1, 2]).all(i, v, v == i + 1)",
    # The text of a string or comment is never rewritten.
    "'x.all(i, v, true)'.size() == 17 // [1].all(i, v, false)",
]

SORTING = [
    "[].sortBy(e, e) == []",
    '["a"].sortBy(e, e) == ["a"]',
    "[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]",
    "[-3, 1, -5, -2, 4].map(e, e * 2).sortBy(e, -(e * e)) == [-10, 8, -6, -4, 2]",
    "lists.range(3).sortBy(e, -e) == [2, 1, 0]",
    '["a", "c", "b", "first"].sortBy(e, e == "first" ? "" : e) == ["first", "a", "b", "c"]',
    "[{'field': 'lo'}, {'field': 'hi'}].sortBy(m, m.field) == [{'field': 'hi'}, {'field': 'lo'}]",
    "[{'x':4}, {'x':3}].sortBy(m, m['x']) == [{'x':3}, {'x':4}]",
    'device.attributes["driver-a"].ids.sortBy(x, -x) == [3, 2, 1]',
    'device.attributes["driver-a"].names.sortBy(n, n) == ["a", "b"]',
    '[quantity("1Gi"), quantity("1M")].sortBy(q, q) == [quantity("1M"), quantity("1Gi")]',
    # Ties keep their order.
    "[[2, 'a'], [1, 'b'], [2, 'c']].sortBy(p, p[0]).map(p, p[1]) == ['b', 'a', 'c']",
    # The rest of the lists extension.
    "lists.range(4) == [0,1,2,3]",
    "[5,1,2,3].reverse() == [3,2,1,5]",
    "[1,2,3,4].slice(1, 3) == [2, 3]",
    "[1,[2,[3,4]]].flatten(2) == [1,2,3,4]",
    "[-2, 5, -2, 1, 1, 5, -2, 1].distinct() == [-2, 5, 1]",
    '["d", "a", "b", "c"].sort() == ["a", "b", "c", "d"]',
]


@pytest.mark.parametrize("expression", COMPREHENSIONS + SORTING)
def test_upstream_examples(expression: str) -> None:
    """Upstream's documented examples evaluate to true."""
    assert compile_selector(expression).matches(DEVICE) is True


@pytest.mark.parametrize(
    ("expression", "message", "column"),
    [
        ("[].all(i, i, i < i)", "duplicate variable name: i", 11),
        ("[].all(__result__, i, __result__ < i)", "overwrites accumulator variable", 8),
        ("[].all(j, __result__, __result__ < j)", "overwrites accumulator variable", 11),
        ("[].all(i.j, k, i.j < k)", "argument must be a simple name", 8),
        ("[].exists(j, i.k, j < i.k)", "argument must be a simple name", 14),
        ("[].transformList(i.j, k, i.j + k)", "argument must be a simple name", 18),
        ("{}.transformMapEntry(j, i.k, {j: i.k})", "argument must be a simple name", 25),
        ("1.all(j, k, j < k)", "of type 'int' cannot be the range of a comprehension", 3),
        ("''.exists(j, k, j < k)", "of type 'string' cannot be the range", 4),
        ("''.existsOne(j, k, j < k)", "of type 'string' cannot be the range", 4),
        ("{}.transformMapEntry(j, k, 'bad filter', {k: j})", "no matching overload", 4),
        ("[1, 2].transformList(i, v, v % 2 == 0 ? [v] : v).size() > 0", "no matching overload", 39),
        ("[1, 2].all(i, v, v + 'a' == 1)", "no matching overload for '_+_'", 20),
        ("[1].sortBy(e.f, e)", "argument is not an identifier", 12),
        ("{}.sortBy(e, e) == []", "sortBy can only be applied to a list", 1),
    ],
)
def test_compile_errors_point_at_the_users_text(expression: str, message: str, column: int) -> None:
    """Macro errors use upstream's words and the position in the original expression."""
    with pytest.raises(CELError) as error:
        compile_selector(expression)
    text = str(error.value)
    assert message in text
    assert f"<input>:1:{column}:" in text
    assert expression in text
    assert "__" not in text.replace("__result__", "")


def test_errors_on_later_lines_keep_their_line() -> None:
    """A multi-line expression's error names its own line and column."""
    with pytest.raises(CELError) as error:
        compile_selector("[1, 2]\n  .all(i, v,\n    v + 'a' == 1)")
    assert "<input>:3:7: found no matching overload for '_+_'" in str(error.value)
    assert " |     v + 'a' == 1)\n | ......^" in str(error.value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "[1, 1].transformMapEntry(i, v, {v: i}).size() > 0",
            "insert failed: key 1 already exists",
        ),
        (
            "[0, 0u].transformMapEntry(i, v, {v: i}).size() > 0",
            "insert failed: key 0 already exists",
        ),
        ('["d", 3, 2, "c"].sort().size() > 0', "list elements must have the same type"),
        ("[1, 'a'].sortBy(e, e).size() > 0", "list elements must have the same type"),
        ("[[1], [2]].sortBy(e, e).size() > 0", "list elements must be comparable"),
        ("[1,2,3,4].slice(3, 0).size() > 0", "cannot slice(3, 0), start index must be less than"),
        ("[1,2,3,4].slice(0, 10).size() > 0", "cannot slice(0, 10), list is length 4"),
        ("[1,2,3,4].slice(-5, 10).size() > 0", "cannot slice(-5, 10), negative indexes not"),
        ("[1,[2,[3,[4]]]].flatten(-1).size() > 0", "level must be non-negative"),
        ("[1, 2].all(i, v, v / 0 > 0)", "by zero"),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    """Evaluation errors carry upstream's message."""
    with pytest.raises(CELError, match="CEL runtime error") as error:
        compile_selector(expression).matches(DEVICE)
    assert message in str(error.value)


def test_all_and_exists_absorb_errors_like_logical_operators() -> None:
    """A false element makes all() false and a true one makes exists() true despite errors."""
    assert compile_selector("![0, 2].all(i, v, 2 / v == 2)").matches(DEVICE)
    assert compile_selector("[0, 1].exists(i, v, 1 / v > 0)").matches(DEVICE)
    with pytest.raises(CELError, match="by zero"):
        compile_selector("[0, 1].existsOne(i, v, 1 / v > 0)").matches(DEVICE)


def test_rewrite_keeps_original_positions() -> None:
    """Every character copied from the user's text maps back to its own offset."""
    source = "x.all(i, v, v > 1)".replace("x", "[1, 2]")
    rewritten = rewrite_macros(source)
    predicate = rewritten.text.index("v > 1")
    assert rewritten.original_offset(predicate) == source.index("v > 1")
    assert rewritten.text.count("[1, 2]") == 1


def _nested(levels: int, *, two: bool) -> str:
    text = "true"
    for level in range(levels):
        args = f"i{level}, v{level}" if two else f"v{level}"
        text = f"[{', '.join(str(n) for n in range(30))}].all({args}, {text})"
    return text


def test_cost_is_bounded_like_the_one_variable_macros() -> None:
    """A nested two-variable comprehension is refused like the one-variable form."""
    one, two = _nested(2, two=False), _nested(2, two=True)
    cost_one, cost_two = compile_selector(one).cost, compile_selector(two).cost
    assert cost_one < cost_two < 10 * cost_one
    for expression in (_nested(4, two=False), _nested(4, two=True)):
        with pytest.raises(CELError, match=f"exceeds the limit of {MAX_COST}"):
            compile_selector(expression)
    sort_by = "lists.range(1000).sortBy(e, -e).map(x, lists.range(1000).sortBy(e, e)).size() > 0"
    with pytest.raises(CELError, match=f"exceeds the limit of {MAX_COST}"):
        compile_selector(sort_by)
