"""The contract of normalize/to_version beyond the fixtures: copies, defaults, table, refusals."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest

from dralib.kube.normalize import SUPPORTED, NormalizeError, normalize, structured, to_version

from . import expected

V1 = "resource.k8s.io/v1"


def _slice(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s", "uid": "u-1"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            **spec,
        },
    }


def test_input_is_not_mutated_and_output_is_independent() -> None:
    """normalize copies: changing the result never reaches the caller's object."""
    original = _slice(devices=[{"name": "gpu-0", "basic": {"attributes": {"a": {"int": 1}}}}])
    pristine = copy.deepcopy(original)
    result = normalize(original)
    result["spec"]["devices"][0]["attributes"]["a"]["int"] = 99
    assert original == pristine


def test_any_mapping_is_accepted() -> None:
    """Read-only mappings (and other Mapping types) normalize to plain dicts."""
    frozen = MappingProxyType({**_slice(), "metadata": MappingProxyType({"name": "s", "uid": "u"})})
    result = normalize(frozen)
    assert type(result) is dict
    assert type(result["metadata"]) is dict


def test_list_items_take_type_from_keywords() -> None:
    """Items of a list response lack apiVersion/kind; the caller passes them as keywords."""
    item = _slice()
    del item["apiVersion"], item["kind"]
    result = normalize(item, api_version="resource.k8s.io/v1beta1", kind="ResourceSlice")
    assert (result["apiVersion"], result["kind"]) == (V1, "ResourceSlice")


def test_object_type_wins_over_keywords() -> None:
    """TypeMeta present on the object is what counts, not the keyword fallback."""
    result = normalize(_slice(), api_version="resource.k8s.io/v9", kind="Nonsense")
    assert result["kind"] == "ResourceSlice"


def test_zero_values_of_older_slices_are_left_out() -> None:
    """v1beta1's empty nodeName and false allNodes mean 'unset', which v1 omits."""
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "a", "operator": "Exists"}]}]}
    result = normalize(_slice(nodeName="", allNodes=False, nodeSelector=selector))
    assert "nodeName" not in result["spec"]
    assert "allNodes" not in result["spec"]
    assert result["spec"]["nodeSelector"] == selector


def test_request_with_only_zero_inline_fields_has_no_exactly() -> None:
    """Upstream's conversion sets `exactly` only if an inline field is non-zero.

    Such requests then fail validation (no class), so the conversion is exercised directly.
    """
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "a", "deviceClassName": "", "count": 0, "firstAvailable": []},
                    {"name": "b", "deviceClassName": "", "selectors": []},
                ]
            }
        },
    }
    structured.claims_to_exactly(claim)
    requests = claim["spec"]["devices"]["requests"]
    assert requests[0] == {"name": "a", "firstAvailable": []}
    assert requests[1] == {"name": "b", "exactly": {"deviceClassName": "", "selectors": []}}


@pytest.mark.parametrize(
    ("served", "internal"),
    [
        (("resource.k8s.io/v1beta2", "DeviceClass"), (V1, "DeviceClass")),
        (("resource.k8s.io/v1beta1", "ResourceSlice"), (V1, "ResourceSlice")),
        (("resource.k8s.io/v1alpha3", "DeviceTaintRule"), (V1, "DeviceTaintRule")),
        (("resource.k8s.io/v1alpha2", "ResourceClaim"), (V1, "ResourceClaim")),
        (("resource.k8s.io/v1alpha2", "ResourceSlice"), (V1, "ResourceSlice")),
        (
            ("resource.k8s.io/v1alpha2", "ResourceClass"),
            ("resource.k8s.io/v1alpha2", "ResourceClass"),
        ),
        (
            ("resource.k8s.io/v1alpha3", "PodSchedulingContext"),
            ("resource.k8s.io/v1alpha2", "PodSchedulingContext"),
        ),
        (("v1", "Pod"), ("v1", "Pod")),
        (("v1", "Namespace"), ("v1", "Namespace")),
        (("v1", "LimitRange"), ("v1", "LimitRange")),
        (("scheduling.k8s.io/v1", "PriorityClass"), ("scheduling.k8s.io/v1", "PriorityClass")),
        (("policy/v1", "PodDisruptionBudget"), ("policy/v1", "PodDisruptionBudget")),
        (("events.k8s.io/v1", "Event"), ("events.k8s.io/v1", "Event")),
    ],
)
def test_supported_table(served: tuple[str, str], internal: tuple[str, str]) -> None:
    """SUPPORTED maps each served pair to the internal pair normalize produces."""
    assert SUPPORTED[served] == internal


def test_supported_excludes_unserved_pairs() -> None:
    """Pairs no Kubernetes release served are absent, so discovery never picks them."""
    assert ("resource.k8s.io/v1beta1", "DeviceTaintRule") not in SUPPORTED
    assert ("resource.k8s.io/v1", "ResourceClass") not in SUPPORTED
    assert len(SUPPORTED) == 35


def test_to_version_keeps_classic_for_v1() -> None:
    """Serving as v1 keeps the `classic` mapping, which normalize then passes through."""
    internal = expected("classic-claim")
    assert to_version(internal, V1) == internal


@pytest.mark.parametrize(
    ("case", "version", "field", "reason"),
    [
        ("classic-claim", "resource.k8s.io/v1beta1", "classic", "cannot be served as"),
        ("claim-controller-1.31", "resource.k8s.io/v1beta2", "classic", "cannot be served as"),
        ("claim-allocated", "resource.k8s.io/v1alpha2", "apiVersion", "unsupported apiVersion"),
        ("devicetaintrule", "resource.k8s.io/v1beta1", "apiVersion", "unsupported apiVersion"),
        ("pod-claims", "resource.k8s.io/v1beta1", "kind", "cannot be converted"),
        ("classic-resourceclass", V1, "kind", "cannot be converted"),
    ],
)
def test_to_version_refusals(case: str, version: str, field: str, reason: str) -> None:
    """to_version refuses what the target version cannot express, naming the reason."""
    with pytest.raises(NormalizeError) as raised:
        to_version(expected(case), version)
    assert raised.value.field == field
    assert reason in str(raised.value)


def test_to_version_validates_its_input() -> None:
    """A malformed v1 object fails in to_version with the same error normalize gives."""
    bad = copy.deepcopy(expected("deviceclass"))
    bad["spec"]["selectors"][0]["cel"]["expression"] = 7
    with pytest.raises(NormalizeError) as raised:
        to_version(bad, "resource.k8s.io/v1beta1")
    assert raised.value.field == "spec.selectors[0].cel.expression"


def test_budget_bounds_are_counts_or_percentages() -> None:
    """A PodDisruptionBudget's minAvailable is an integer or a percentage; anything else is an
    error naming the field, and a PriorityClass needs its value."""
    good = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
    }
    assert normalize(good)["spec"]["minAvailable"] == "50%"
    bad = {**good, "spec": {"minAvailable": "half"}}
    with pytest.raises(NormalizeError) as error:
        normalize(bad)
    assert error.value.field == "spec.minAvailable"
    no_value = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "uid": "u2"},
    }
    with pytest.raises(NormalizeError) as error:
        normalize(no_value)
    assert error.value.field == "value"
