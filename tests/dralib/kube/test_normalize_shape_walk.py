"""The path-free walk of a shape (`fits_all`) agrees with `check` on every value tried."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest

from dralib.kube.normalize import NormalizeError
from dralib.kube.normalize.errors import Context
from dralib.kube.normalize.registry import _TABLE
from dralib.kube.normalize.shapes import METADATA

from . import load_yaml, served_inputs

# What a field may wrongly hold: every JSON type, a 65-bit integer, bad quantities, a tuple.
WRONG: list[Any] = [None, 1, -1, 2**70, 1.5, True, "x", "12Zi", "", [], [None], {}, {"a": None}]
CTX = Context(kind="Test", name="t", namespace="")


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, entry in value.items():
            yield from _places(entry, (*path, key))
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            yield from _places(entry, (*path, index))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    changed = copy.deepcopy(value)
    parent = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return changed


def _passes(shape: Any, value: Any) -> bool:
    try:
        shape.check(value, "", CTX)
    except NormalizeError:
        return False
    return True


def _mutants(value: Any, rng: random.Random) -> Iterator[Any]:
    yield value
    for path in _places(value):
        for new in rng.sample(WRONG, 4):
            yield _replaced(value, path, new)
        if path and isinstance(path[-1], str):
            parent = copy.deepcopy(value)
            target = parent
            for step in path[:-1]:
                target = target[step]
            del target[path[-1]]  # a required field missing
            yield parent


@pytest.mark.parametrize("served", served_inputs(), ids=lambda s: f"{s.case}/{s.path.name}")
def test_fits_all_agrees_with_check(served: Any) -> None:
    """For a fixture and every value made by breaking one of its fields, `fits_all` says True
    exactly when `check` raises nothing, for the kind's shape and for metadata's."""
    raw = load_yaml(served.path)
    shape = _TABLE[(raw["apiVersion"], raw["kind"])].shape
    rng = random.Random(served.path.name)
    tried = failed = 0
    for mutant in _mutants(raw, rng):
        if not isinstance(mutant, dict):
            continue
        for which, value in ((shape, mutant), (METADATA, mutant.get("metadata"))):
            if value is None:
                continue
            expected = _passes(which, value)
            assert which.fits_all(value) is expected, (served.path, value)
            tried += 1
            failed += not expected
    # Both answers were seen many times: the comparison is not vacuous.
    assert tried > 50 and 0 < failed < tried
