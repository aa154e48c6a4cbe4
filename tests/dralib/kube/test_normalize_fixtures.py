"""Data-driven checks: every served fixture normalizes to its case's hand-written v1 shape."""

from __future__ import annotations

import copy

import pytest

from dralib.kube.normalize import normalize, to_version

from . import Served, case_names, expected, load_yaml, served_inputs

SERVABLE = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
SERVED = served_inputs()
# to_version serves v1 objects down to v1alpha3; classic v1alpha2 is read-only.
EXACT = [s for s in SERVED if s.exact and s.api_version in (*SERVABLE, "resource.k8s.io/v1alpha3")]


def _id(served: Served) -> str:
    return f"{served.case}/{served.path.name}"


@pytest.mark.parametrize("served", SERVED, ids=_id)
def test_served_fixture_normalizes_to_expected(served: Served) -> None:
    """A fixture as some version serves it normalizes to the case's expected.yaml."""
    assert normalize(load_yaml(served.path)) == expected(served.case)


@pytest.mark.parametrize("served", SERVED, ids=_id)
def test_owned_fixture_normalizes_as_a_copied_one(served: Served) -> None:
    """Handed over (`owned`, rewritten in place), a fixture normalizes to the same object."""
    assert normalize(load_yaml(served.path), owned=True, validate=True) == expected(served.case)


@pytest.mark.parametrize("case", case_names())
def test_expected_is_a_fixed_point(case: str) -> None:
    """Normalizing an already-internal object changes nothing."""
    internal = expected(case)
    assert normalize(internal) == internal


@pytest.mark.parametrize("served", EXACT, ids=_id)
def test_to_version_reproduces_served_fixture(served: Served) -> None:
    """to_version turns the expected v1 object back into exactly what the fixture says."""
    assert to_version(expected(served.case), served.api_version) == load_yaml(served.path)


# Cases using v1 features that v1alpha3 has no field for; test_v1alpha3_loss covers them.
LOSSY_IN_V1ALPHA3 = frozenset({"slice-partitionable"})


def _round_trip_params() -> list[tuple[str, str]]:
    params = []
    for case in case_names():
        internal = expected(case)
        if internal["apiVersion"] != "resource.k8s.io/v1" or "classic" in internal:
            continue
        versions = (
            SERVABLE if case in LOSSY_IN_V1ALPHA3 else (*SERVABLE, "resource.k8s.io/v1alpha3")
        )
        for version in versions:
            if internal["kind"] == "DeviceTaintRule" and version == "resource.k8s.io/v1beta1":
                continue
            params.append((case, version))
    return params


@pytest.mark.parametrize(("case", "version"), _round_trip_params())
def test_round_trip(case: str, version: str) -> None:
    """normalize(to_version(x, v)) == x for every non-classic v1 fixture and served version."""
    internal = expected(case)
    pristine = copy.deepcopy(internal)
    served = to_version(internal, version)
    assert served["apiVersion"] == version
    assert normalize(served) == pristine
    assert internal == pristine


def test_v1alpha3_loss() -> None:
    """Serving as v1alpha3 loses only capacity requestPolicy, which that version cannot carry."""
    internal = expected("slice-partitionable")
    back = normalize(to_version(internal, "resource.k8s.io/v1alpha3"))
    for device in internal["spec"]["devices"]:
        for capacity in device.get("capacity", {}).values():
            capacity.pop("requestPolicy", None)
    assert back == internal
