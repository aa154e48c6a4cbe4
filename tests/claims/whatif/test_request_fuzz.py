"""Property test of the what-if request body: whatever JSON value of whatever type or shape
stands in any one place of a request, it is answered or refused with a 400 naming a field,
never a 500, by the API and by jobs.

The places are every key and list item of two valid requests, at every depth (REQUEST_KEYS,
each assumed change's fields, an add-nodes shape, its node, slices, devices and taints), plus a
new key in each mapping: around the wrong value the request is valid, so it reaches the code
that reads that place. Hypothesis draws the values (nested lists and maps, numbers, strings,
null), derandomized and bounded: VALUES_PER_PLACE per place, the same every run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claims.whatif.options import REQUEST_KEYS
from tests.claims.whatif.cluster import DRIVER
from tests.claims.whatif.helpers import URL, claim_yaml

VALUES_PER_PLACE = 4

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "max", "{node}", "a/b/c", "team-a/x", "node-a", "NoSchedule"]),
)
anything = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)

SHAPE = {
    "node": {"metadata": {"labels": {"pool": "new"}}, "spec": {"taints": []}},
    "slices": [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "{node}-gpu", "labels": {"a": "b"}},
            "spec": {
                "driver": DRIVER,
                "nodeName": "{node}",
                "pool": {"name": "{node}", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"index": {"int": 0}, "model": {"string": "a"}},
                        "capacity": {"memory": {"value": "1Gi"}},
                        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    }
                ],
            },
        }
    ],
}
CHANGES = [
    {"op": "release-claim", "claim": "team-a/x"},
    {"op": "remove-node", "node": "node-d"},
    {"op": "add-nodes", "like": "node-a", "count": 1},
    {"op": "add-nodes", "count": 2, "shape": SHAPE, "namePrefix": "gpu-node"},
    {"op": "taintDevice", "device": f"{DRIVER}/node-a/gpu-0", "taint": {"key": "k"}},
    {"op": "untaint-device", "device": f"{DRIVER}/node-a/gpu-0", "key": "k"},
    {"op": "drop-pool", "pool": f"{DRIVER}/node-b"},
]
# Every option and every kind of assumed change but release-claim, which asks for an allocated
# claim the small cluster lacks: it goes alone, in a request of its own.
FULL: dict[str, Any] = {
    "yaml": claim_yaml(count=1, namespace="team-a"),
    "nodes": ["node-a", "node-b"],
    "nodeSelector": "pool in (a,b)",
    "count": 2,
    "assume": [change for change in CHANGES if change["op"] != "release-claim"],
    "features": {"DeviceTaints": True},
    "namespace": "team-a",
    "gang": False,
    "preemption": True,
    "nodesOffset": 1,
    "nodesLimit": 1,
}
RELEASE: dict[str, Any] = {"yaml": claim_yaml(count=1), "assume": [CHANGES[0]]}
BASES = {"full": FULL, "release": RELEASE}
assert set(FULL) == set(REQUEST_KEYS), "every request key is in the full request"


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value where another value can go: each key and list item, and
    one new key in each mapping."""
    if isinstance(value, dict):
        yield (*path, "x-new")
        for key, item in value.items():
            yield (*path, key)
            yield from places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from places(item, (*path, index))


PLACES = [
    (name, path) for name, base in BASES.items() for path in places(base) if path != ("x-new",)
]


def with_value(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    target: Any = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


def test_the_requests_are_valid_as_they_are(small, api) -> None:
    """Without a wrong value both requests are answered (the release finds no claim to free)."""
    assert api.post(URL, FULL, format="json").status_code == 200
    released = api.post(URL, RELEASE, format="json")
    assert released.json() == {"field": "assume[0].claim", "detail": released.json()["detail"]}


@pytest.mark.parametrize(
    ("base", "path"), PLACES, ids=[f"{n}:{'.'.join(map(str, p))}" for n, p in PLACES]
)
@settings(
    max_examples=VALUES_PER_PLACE,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=anything)
def test_no_value_in_any_place_is_a_500(small, api, base, path, value) -> None:
    """The answer endpoint says 200 or a 400 naming a field; the jobs endpoint 202 or 400, and
    a job it accepted (run inline here, conftest) never fails with an internal error."""
    body = with_value(BASES[base], path, value)
    answer = api.post(URL, body, format="json")
    assert answer.status_code in (200, 400), answer.content[:300]
    if answer.status_code == 400:
        assert isinstance(answer.json().get("field"), str)
    job = api.post(URL + "jobs/", body, format="json")
    assert job.status_code in (202, 400), job.content[:300]
    if job.status_code == 202:
        error = job.json()["error"]
        assert error is None or error["detail"] != "internal error; see the worker log"
