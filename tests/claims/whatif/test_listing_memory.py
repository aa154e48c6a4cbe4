"""What the resident cluster read costs: equal parts of decoded objects held once, in bytes."""

from __future__ import annotations

import copy
import gc
import tracemalloc
from typing import Any

import orjson
import pytest

from claims.whatif.listing import forget_cached_rows, list_cluster
from claims.whatif.rows import share_equal


def _traced_bytes_of_a_fresh_read() -> tuple[int, int]:
    """(bytes the read's objects hold, devices in its slices), measured by tracemalloc."""
    forget_cached_rows()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        state = list_cluster()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    devices = sum(len(s["spec"].get("devices") or []) for s in state.slices)
    return held, devices


def test_equal_parts_become_one_object() -> None:
    """Equal attribute values and capacities of two devices are one object afterwards."""
    device = {
        "name": "gpu-0",
        "attributes": {"model": {"string": "a100"}, "uuid": {"string": "GPU-1"}},
        "capacity": {"memory": {"value": "40Gi"}},
    }
    other = copy.deepcopy(device) | {"name": "gpu-1"}
    other["attributes"]["uuid"] = {"string": "GPU-2"}
    obj = {"spec": {"devices": [device, other]}}
    expected = copy.deepcopy(obj)
    memo: dict[Any, Any] = {}
    shared = share_equal(obj, memo)
    assert shared == expected
    first, second = shared["spec"]["devices"]
    assert first["attributes"]["model"] is second["attributes"]["model"]
    assert first["capacity"] is second["capacity"]
    assert first["attributes"]["uuid"] is not second["attributes"]["uuid"]


def test_json_types_are_never_merged() -> None:
    """1, 1.0, true and null are equal or alike to Python, never to JSON: each keeps its type."""
    values = [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": None}, {"v": "1"}, {"v": [1]}, {"v": {}}]
    memo: dict[Any, Any] = {}
    shared = [share_equal(v, memo) for v in copy.deepcopy(values)]
    assert [orjson.dumps(v) for v in shared] == [orjson.dumps(v) for v in values]
    assert len({id(v) for v in shared}) == len(values)
    again = share_equal({"v": 1.0}, memo)
    assert again is shared[1]


def test_one_entry_maps_inside_others_keep_their_types() -> None:
    """One-entry maps nested in a list or map (shared without a call of their own) keep JSON's
    types apart, are one object when equal, and nest past the depth bound unharmed."""
    values = [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": None}, {"v": "1"}, {"v": [1]}, {"v": {}}]
    memo: dict[Any, Any] = {}
    shared = share_equal({"a": copy.deepcopy(values), "b": copy.deepcopy(values)}, memo)
    assert orjson.dumps(shared) == orjson.dumps({"a": values, "b": values})
    assert len({id(v) for v in shared["a"]}) == len(values)
    assert all(a is b for a, b in zip(shared["a"], shared["b"], strict=True))
    chain = '{"k":' * 900 + '"leaf"' + "}" * 900
    assert share_equal(orjson.loads(chain), memo) == orjson.loads(chain)


def test_big_and_deep_values_are_read_whole() -> None:
    """A map past the size bound and nesting past the depth bound come back equal, unshared."""
    big = {f"k{i}": i for i in range(100)}
    # orjson decodes up to 1,024 levels, near Python's recursion limit.
    deep = "[" * 900 + '"leaf"' + "]" * 900
    memo: dict[Any, Any] = {}
    assert share_equal(copy.deepcopy(big), memo) == big
    assert share_equal(orjson.loads(deep), memo) == orjson.loads(deep)
    assert share_equal(copy.deepcopy(big), memo) is not share_equal(copy.deepcopy(big), memo)


@pytest.mark.django_db
def test_a_read_holds_the_slices_once(demo) -> None:
    """The decoded cluster (nodes and claims included) costs under 2 KB a device of the 20-node
    demo (4.8 KB when every part was an object of its own), and equals an unshared decode."""
    held, devices = _traced_bytes_of_a_fresh_read()
    assert devices > 100
    assert held / devices < 2000, f"{held / devices:.0f} bytes a device"
    state = list_cluster()
    assert orjson.loads(orjson.dumps(state.slices)) == state.slices
    models = [
        d["attributes"]["model"]
        for s in state.slices
        for d in s["spec"].get("devices") or []
        if "model" in (d.get("attributes") or {})
    ]
    assert len(models) > len({orjson.dumps(m) for m in models})
    assert len({id(m) for m in models}) == len({orjson.dumps(m) for m in models})


def test_containers_with_a_new_long_string_are_not_kept_whole() -> None:
    """A map holding a long string seen for the first time (a device's UUID) is not kept in the
    memo, nor the maps around it: the memo keeps its short parts only. An equal map that comes
    again is shared from its second copy on, and every value stays equal."""
    devices = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}, "uuid": {"string": u}}}
        for i, u in enumerate(["GPU-0f9a3e2c-aaaa", "GPU-0f9a3e2c-bbbb"])
    ]
    repeated = [{"serial": "SN-0000000000000042", "slot": 1} for _ in range(3)]
    original = copy.deepcopy([devices, repeated])
    memo: dict[Any, Any] = {}
    # Decoded as a read decodes them: each string its own object.
    shared = [share_equal(orjson.loads(orjson.dumps(v)), memo) for v in [devices, repeated]]
    assert shared == original
    first, second = shared[0]
    assert first["attributes"]["model"] is second["attributes"]["model"]
    kept = {id(v) for v in memo.values()}
    assert id(first["attributes"]) not in kept and id(first) not in kept
    assert id(first["attributes"]["uuid"]) not in kept
    one, two, three = shared[1]
    assert one is not two and two is three
