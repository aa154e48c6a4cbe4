"""Malformed and drifted objects are rejected with an error naming the object and field path."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from dralib.kube.normalize import NormalizeError, normalize

from . import FIXTURES, load_yaml

CASES: list[dict[str, Any]] = load_yaml(FIXTURES / "errors.yaml")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_error_names_object_and_field(case: dict[str, Any]) -> None:
    """Each bad object raises NormalizeError with the documented field path and message."""
    with pytest.raises(NormalizeError) as raised:
        normalize(case["object"])
    assert raised.value.field == case["field"]
    assert str(raised.value) == case["error"]


def test_error_attributes() -> None:
    """The error carries kind, namespace, name and field separately for callers to store."""
    bad = CASES[0]["object"]
    with pytest.raises(NormalizeError) as raised:
        normalize(bad)
    error = raised.value
    assert (error.kind, error.namespace, error.name) == ("ResourceClaim", "default", "foo")
    assert isinstance(error, ValueError)


def test_error_survives_pickling() -> None:
    """A NormalizeError crosses process boundaries (Celery) intact."""
    error = NormalizeError(
        kind="ResourceSlice",
        name="s",
        namespace="",
        field="spec.driver",
        reason="required field missing",
    )
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "ResourceSlice s: spec.driver: required field missing"
    assert copy.field == "spec.driver"


@pytest.mark.parametrize("value", [None, [], "ResourceSlice", 3])
def test_non_mapping_rejected(value: Any) -> None:
    """Something that is not an object at all is a NormalizeError, not a crash."""
    with pytest.raises(NormalizeError, match="expected a mapping"):
        normalize(value)


def test_long_values_are_shortened() -> None:
    """A huge offending value is cut in the message so logs stay readable."""
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "c", "uid": "u"},
        "spec": {"extendedResourceName": ["x" * 500]},
    }
    with pytest.raises(NormalizeError) as raised:
        normalize(obj)
    assert raised.value.field == "spec.extendedResourceName"
    assert len(str(raised.value)) < 150
    assert str(raised.value).endswith("...")
