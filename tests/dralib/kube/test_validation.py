"""normalize(validate=True) refuses what the API server refuses, naming the field per version."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dralib.kube.normalize import NormalizeError, normalize
from dralib.kube.normalize.schema import MAX_DEPTH, MAX_NODES, plain_when_read

from . import Served, expected, load_yaml, served_inputs

V1 = "resource.k8s.io/v1"
V1BETA2 = "resource.k8s.io/v1beta2"
V1BETA1 = "resource.k8s.io/v1beta1"
V1ALPHA3 = "resource.k8s.io/v1alpha3"


def _meta(name: str = "x", **extra: Any) -> dict[str, Any]:
    return {"name": name, "uid": "u-1", **extra}


def _slice(version: str = V1, devices: Any = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        **spec,
    }
    if "nodeName" not in spec and "allNodes" not in spec and "nodeSelector" not in spec:
        body["nodeName"] = "node-1"
    if devices is not None:
        if version in (V1BETA1, V1ALPHA3):
            devices = [
                {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                for d in devices
            ]
        body["devices"] = devices
    return {"apiVersion": version, "kind": "ResourceSlice", "metadata": _meta("s"), "spec": body}


def _claim(version: str = V1, requests: Any = None, **devices: Any) -> dict[str, Any]:
    if requests is None:
        exact = {"deviceClassName": "gpu.example.com"}
        requests = [
            {"name": "gpu", "exactly": exact}
            if version in (V1, V1BETA2)
            else {"name": "gpu", **exact}
        ]
    return {
        "apiVersion": version,
        "kind": "ResourceClaim",
        "metadata": _meta("c", namespace="ns"),
        "spec": {"devices": {"requests": requests, **devices}},
    }


def _class(*expressions: str) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": _meta("gpu.example.com"),
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def _device(name: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def _refused(obj: dict[str, Any]) -> NormalizeError:
    with pytest.raises(NormalizeError) as raised:
        normalize(obj, validate=True)
    return raised.value


TRUE = "device.driver == 'gpu.example.com'"
LIMIT_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "33-requests",
        _claim(
            requests=[{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)]
        ),
        "spec.devices.requests",
        "at most 32 items, got 33",
    ),
    (
        "9-subrequests",
        _claim(
            requests=[
                {
                    "name": "r",
                    "firstAvailable": [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)],
                }
            ]
        ),
        "spec.devices.requests[0].firstAvailable",
        "at most 8 items",
    ),
    (
        "33-selectors",
        _claim(
            requests=[
                {
                    "name": "r",
                    "exactly": {
                        "deviceClassName": "c",
                        "selectors": [{"cel": {"expression": TRUE}}] * 33,
                    },
                }
            ]
        ),
        "spec.devices.requests[0].exactly.selectors",
        "at most 32 items",
    ),
    (
        "33-constraints",
        _claim(constraints=[{"matchAttribute": "gpu.example.com/model"}] * 33),
        "spec.devices.constraints",
        "at most 32 items",
    ),
    (
        "33-config",
        _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": {}}}] * 33),
        "spec.devices.config",
        "at most 32 items",
    ),
    (
        "129-devices",
        _slice(devices=[_device(f"gpu-{i}") for i in range(129)]),
        "spec.devices",
        "at most 128 items",
    ),
    (
        "65-devices-with-taints",
        _slice(
            devices=[
                _device(f"gpu-{i}", taints=[{"key": "k", "effect": "NoSchedule"}])
                for i in range(65)
            ]
        ),
        "spec.devices",
        "at most 64 items",
    ),
    (
        "33-attributes-and-capacities",
        _slice(
            devices=[
                _device(
                    attributes={f"a{i}": {"int": i} for i in range(20)},
                    capacity={f"c{i}": {"value": "1"} for i in range(13)},
                )
            ]
        ),
        "spec.devices[0]",
        "must not exceed 32, got 33",
    ),
    (
        "long-expression",
        _class("true && " * 1300 + "true"),
        "spec.selectors[0].cel.expression",
        "the limit is 10240",
    ),
    (
        "5-device-taints",
        _slice(
            devices=[_device(taints=[{"key": f"k{i}", "effect": "NoSchedule"} for i in range(5)])]
        ),
        "spec.devices[0].taints",
        "at most 4 items",
    ),
]

RULE_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "all-with-count-v1",
        _claim(
            requests=[
                {
                    "name": "r",
                    "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2},
                }
            ]
        ),
        "spec.devices.requests[0].exactly.count",
        "must not be specified when allocationMode is 'All'",
    ),
    (
        "all-with-count-v1beta1",
        _claim(
            V1BETA1,
            requests=[{"name": "r", "deviceClassName": "c", "allocationMode": "All", "count": 2}],
        ),
        "spec.devices.requests[0].count",
        "must not be specified when allocationMode is 'All'",
    ),
    (
        "unknown-allocation-mode",
        _claim(
            requests=[{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}]
        ),
        "spec.devices.requests[0].exactly.allocationMode",
        "unsupported value 'Some'",
    ),
    (
        "class-invalid-cel",
        _class(TRUE, "device.driver =="),
        "spec.selectors[1].cel.expression",
        "CEL compile error",
    ),
    (
        "class-non-bool-cel",
        _class("1 + 1"),
        "spec.selectors[0].cel.expression",
        "must evaluate to bool",
    ),
    (
        "request-invalid-cel-v1beta1",
        _claim(
            V1BETA1,
            requests=[
                {
                    "name": "r",
                    "deviceClassName": "c",
                    "selectors": [{"cel": {"expression": "nope("}}],
                }
            ],
        ),
        "spec.devices.requests[0].selectors[0].cel.expression",
        "CEL compile error",
    ),
    (
        "slice-node-name-and-all-nodes",
        _slice(nodeName="node-1", allNodes=True),
        "spec",
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
        "required, but multiple fields are set: `nodeName`, `allNodes`",
    ),
    (
        "slice-no-node-selection",
        _slice(allNodes=False),
        "spec.allNodes",
        "must be either unset or set to true",
    ),
    (
        "slice-no-node-selection-at-all",
        _slice(nodeSelector=None),
        "spec",
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
        "required",
    ),
    (
        "slice-selector-two-terms",
        _slice(nodeSelector={"nodeSelectorTerms": [{}, {}]}),
        "spec.nodeSelector.nodeSelectorTerms",
        "exactly one node selector term",
    ),
    (
        "device-node-without-per-device-selection",
        _slice(devices=[_device(nodeName="node-1")]),
        "spec.devices[0]",
        "can only be set if `perDeviceNodeSelection` is set to true",
    ),
    (
        "attribute-name-not-identifier-v1",
        _slice(devices=[_device(attributes={"Bad Name!": {"string": "x"}})]),
        "spec.devices[0].attributes[Bad Name!]",
        "valid C identifier",
    ),
    (
        "attribute-name-not-identifier-v1beta1",
        _slice(V1BETA1, devices=[_device(attributes={"Bad Name!": {"string": "x"}})]),
        "spec.devices[0].basic.attributes[Bad Name!]",
        "valid C identifier",
    ),
    (
        "attribute-domain-invalid",
        _slice(devices=[_device(attributes={"Example.com/x": {"int": 1}, "UPPER_/x": {"int": 1}})]),
        "spec.devices[0].attributes[UPPER_/x]",
        "the domain",
    ),
    (
        "capacity-name-with-dash-v1alpha3",
        _slice(V1ALPHA3, devices=[_device(capacity={"capacity-0": "1"})]),
        "spec.devices[0].basic.capacity[capacity-0]",
        "valid C identifier",
    ),
    (
        "attribute-two-types",
        _slice(devices=[_device(attributes={"model": {"string": "a", "int": 1}})]),
        "spec.devices[0].attributes[model]",
        "exactly one value must be specified, got int, string",
    ),
    (
        "attribute-bad-version",
        _slice(devices=[_device(attributes={"v": {"version": "1.2"}})]),
        "spec.devices[0].attributes[v].version",
        "semver.org",
    ),
    (
        "attribute-string-too-long",
        _slice(devices=[_device(attributes={"s": {"string": "x" * 65}})]),
        "spec.devices[0].attributes[s].string",
        "no more than 64 characters",
    ),
    (
        "request-name-not-label",
        _claim(requests=[{"name": "Bad_Name", "exactly": {"deviceClassName": "c"}}]),
        "spec.devices.requests[0].name",
        "RFC 1123 label",
    ),
    (
        "request-class-and-first-available-v1beta1",
        _claim(
            V1BETA1,
            requests=[
                {
                    "name": "r",
                    "deviceClassName": "c",
                    "firstAvailable": [{"name": "s", "deviceClassName": "c"}],
                }
            ],
        ),
        "spec.devices.requests[0]",
        "exactly one of `deviceClassName` or `firstAvailable` is required, but multiple fields "
        "are set",
    ),
    (
        "request-neither-v1",
        _claim(requests=[{"name": "r"}]),
        "spec.devices.requests[0]",
        "exactly one of `exactly` or `firstAvailable` is required",
    ),
    (
        "request-without-class-v1beta1",
        _claim(V1BETA1, requests=[{"name": "r", "count": 2}]),
        "spec.devices.requests[0].deviceClassName",
        "required field missing",
    ),
    (
        "shared-counters-and-devices-v1",
        _slice(
            devices=[_device()],
            sharedCounters=[{"name": "set", "counters": {"mem": {"value": "1"}}}],
        ),
        "spec",
        "only one of `sharedCounters` or `devices` is allowed",
    ),
    (
        "template-with-resource-class-name-v1alpha3",
        {
            "apiVersion": V1ALPHA3,
            "kind": "ResourceClaimTemplate",
            "metadata": _meta("t", namespace="ns"),
            "spec": {"spec": {"resourceClassName": "gpu"}},
        },
        "spec.spec.resourceClassName",
        "classic DRA (resource.k8s.io/v1alpha2)",
    ),
    (
        "name-with-slash",
        {**_class(), "metadata": _meta("a/b")},
        "metadata.name",
        "RFC 1123 subdomain",
    ),
    (
        "namespace-not-label",
        {**_claim(), "metadata": _meta("c", namespace="Team.A")},
        "metadata.namespace",
        "RFC 1123 label",
    ),
    (
        "label-key-invalid",
        {**_class(), "metadata": _meta("c", labels={"-bad": "x"})},
        "metadata.labels[-bad]",
        "invalid label key",
    ),
    (
        "label-value-invalid",
        {**_class(), "metadata": _meta("c", labels={"ok": "not ok"})},
        "metadata.labels[ok]",
        "invalid label value",
    ),
    (
        "annotations-too-large",
        {**_class(), "metadata": _meta("c", annotations={"a": "x" * (256 * 1024)})},
        "metadata.annotations",
        "may not be more than 262144 bytes",
    ),
    ("driver-not-subdomain", _slice(driver="GPU_driver"), "spec.driver", "RFC 1123 subdomain"),
    (
        "device-taint-effect",
        _slice(devices=[_device(taints=[{"key": "k", "effect": "Sometimes"}])]),
        "spec.devices[0].taints[0].effect",
        "unsupported value 'Sometimes'",
    ),
    (
        "taint-rule-effect",
        {
            "apiVersion": V1,
            "kind": "DeviceTaintRule",
            "metadata": _meta("r"),
            "spec": {"taint": {"key": "k", "effect": "NoWay"}},
        },
        "spec.taint.effect",
        "unsupported value 'NoWay'",
    ),
    (
        "node-taint-effect",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": _meta("n"),
            "spec": {"taints": [{"key": "k", "effect": "None"}]},
        },
        "spec.taints[0].effect",
        "supported values: NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (
        "pod-claim-two-sources",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _meta("p", namespace="ns"),
            "spec": {
                "resourceClaims": [
                    {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}
                ]
            },
        },
        "spec.resourceClaims[0]",
        "exactly one of",
    ),
    (
        "constraint-attribute-not-qualified",
        _claim(constraints=[{"matchAttribute": "model"}]),
        "spec.devices.constraints[0].matchAttribute",
        "fully qualified name",
    ),
    (
        "constraint-unknown-request",
        _claim(constraints=[{"requests": ["nope"], "matchAttribute": "a.com/model"}]),
        "spec.devices.constraints[0].requests[0]",
        "must be the name of a request",
    ),
    (
        "config-parameters-not-object",
        _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": [1]}}]),
        "spec.devices.config[0].opaque.parameters",
        "valid JSON object",
    ),
    (
        "toleration-operator",
        _claim(
            requests=[
                {
                    "name": "r",
                    "exactly": {"deviceClassName": "c", "tolerations": [{"operator": "Maybe"}]},
                }
            ]
        ),
        "spec.devices.requests[0].exactly.tolerations[0].operator",
        "unsupported value 'Maybe'",
    ),
    (
        "request-policy-without-multiple-allocations",
        _slice(
            devices=[
                _device(capacity={"mem": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}})
            ]
        ),
        "spec.devices[0].capacity[mem].requestPolicy",
        "allowMultipleAllocations must be true",
    ),
]


@pytest.mark.parametrize(
    ("obj", "field", "reason"),
    [case[1:] for case in RULE_CASES + LIMIT_CASES],
    ids=[case[0] for case in RULE_CASES + LIMIT_CASES],
)
def test_refused_like_the_api_server(obj: dict[str, Any], field: str, reason: str) -> None:
    """Each object the API server would refuse raises NormalizeError at the served field path."""
    error = _refused(copy.deepcopy(obj))
    assert error.field == field
    assert reason in error.reason
    assert str(error).startswith(f"{obj['kind']} ")


def test_without_validate_the_sync_still_mirrors_such_objects() -> None:
    """Objects the API server stored under older rules are still read when not validating."""
    obj = _slice(
        devices=[_device()], sharedCounters=[{"name": "set", "counters": {"m": {"value": "1"}}}]
    )
    assert normalize(obj)["spec"]["sharedCounters"][0]["name"] == "set"


def test_shared_counters_with_devices_allowed_in_1_33_betas() -> None:
    """1.33 served counter sets and devices in one slice under v1beta1 and v1beta2."""
    counters = [{"name": "set", "counters": {"m": {"value": "1"}}}]
    for version in (V1BETA1, V1BETA2):
        obj = _slice(version, devices=[_device()], sharedCounters=counters)
        assert normalize(obj, validate=True)["spec"]["sharedCounters"] == counters


def test_future_attribute_type_is_kept() -> None:
    """An attribute with only a value type newer than this code passes, as it is."""
    obj = _slice(devices=[_device(attributes={"p": {"float": 1.5}})])
    assert normalize(obj, validate=True)["spec"]["devices"][0]["attributes"]["p"] == {"float": 1.5}


def _id(served: Served) -> str:
    return f"{served.case}/{served.path.name}"


@pytest.mark.parametrize("served", served_inputs(), ids=_id)
def test_every_fixture_is_valid(served: Served) -> None:
    """The hand-written fixtures are objects the API server accepts: validation changes nothing."""
    assert normalize(load_yaml(served.path), validate=True) == expected(served.case)


def test_shared_sub_objects_do_not_multiply() -> None:
    """An object handed over with one sub-object shared many times is refused, not expanded."""
    shared: Any = {"x": 1}
    for _ in range(40):
        shared = [shared, shared]
    obj = _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": {"a": shared}}}])
    error = _refused(obj)
    assert "more than 1000000 values" in error.reason
    assert error.field.startswith("spec.devices.config[0].opaque.parameters.a")


def test_nesting_is_bounded_in_free_form_fields() -> None:
    """Opaque parameters nested past 64 levels are refused with their path."""
    nested: Any = 1
    for _ in range(80):
        nested = {"n": nested}
    obj = _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": nested}}])
    error = _unvalidated_error(obj)
    assert "nested deeper than 64 levels" in error.reason
    assert error.field.startswith("spec.devices.config[0].opaque.parameters.n.n")


def test_an_owned_object_is_bounded_as_a_copied_one() -> None:
    """Handed over (`owned`), an object past the copy's bounds gets the same error, same path."""
    shared: Any = {"x": 1}
    for _ in range(40):
        shared = [shared, shared]
    nested: Any = 1
    for _ in range(80):
        nested = {"n": nested}
    for parameters in ({"a": shared}, nested):
        obj = _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": parameters}}])
        copied = _unvalidated_error(obj)
        with pytest.raises(NormalizeError) as raised:
            normalize(obj, owned=True)
        assert (raised.value.field, raised.value.reason) == (copied.field, copied.reason)


def test_an_owned_object_is_rewritten_in_place_unless_a_copy_is_needed() -> None:
    """A plain owned object becomes the result; tuples or other mappings are still copied."""
    obj = _claim()
    assert normalize(obj, owned=True, validate=True) is obj
    with_tuple = _claim(config=[{"opaque": {"driver": "gpu.example.com", "parameters": (1,)}}])
    result = normalize(with_tuple, owned=True)
    assert result is not with_tuple
    assert result["spec"]["devices"]["config"][0]["opaque"]["parameters"] == [1]


def test_plain_when_read_is_proven_by_size_and_depth_only_within_the_copy_bounds() -> None:
    """A compact JSON text of n bytes holds at most (n + 1) // 2 values: at the copy's bound
    the proof holds, one byte over it does not; deeper readers prove nothing."""
    assert plain_when_read(max_depth=MAX_DEPTH, json_bytes=2 * MAX_NODES - 1)
    assert not plain_when_read(max_depth=MAX_DEPTH, json_bytes=2 * MAX_NODES + 1)
    assert not plain_when_read(max_depth=MAX_DEPTH + 1, json_bytes=10)
    # The densest text there is: a list of one-digit numbers, one value per two bytes.
    for count in (0, 1, 5, 1000):
        text = json.dumps([1] * count, separators=(",", ":"))
        assert count + 1 <= (len(text) + 1) // 2


def _unvalidated_error(obj: dict[str, Any]) -> NormalizeError:
    """The error normalize raises even without validation (plain() is always bounded)."""
    with pytest.raises(NormalizeError) as raised:
        normalize(obj)
    return raised.value
