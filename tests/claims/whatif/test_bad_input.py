"""Bad what-if input is a 400 that names the field, never a 500."""

from __future__ import annotations

import json

import pytest

from tests.claims.whatif.helpers import URL, claim_yaml

BIND_DOUBLING = (
    "cel.bind(x0, 'ab', "
    + "".join(f"cel.bind(x{i}, x{i - 1} + x{i - 1}, " for i in range(1, 40))
    + "x39.size() > 0"
    + ")" * 40
)

CASES = [
    ("invalid YAML", {"yaml": "kind: [unclosed"}, "yaml"),
    ("empty", {"yaml": ""}, "yaml"),
    ("unknown class", {"yaml": claim_yaml(device_class="no-such-class")}, "deviceClassName"),
    ("invalid CEL", {"yaml": claim_yaml(selector="device.driver ==")}, "cel.expression"),
    ("hostile CEL", {"yaml": claim_yaml(selector=BIND_DOUBLING)}, "cel.expression"),
    (
        "20 KiB CEL",
        {"yaml": claim_yaml(selector="device.driver == '" + "a" * 20480 + "'")},
        "cel.expression",
    ),
    (
        "wrong version",
        {"yaml": claim_yaml().replace("resource.k8s.io/v1", "resource.k8s.io/v9")},
        "apiVersion",
    ),
    ("only other kinds", {"yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"}, "yaml"),
    ("count zero", {"yaml": claim_yaml(), "count": 0}, "count"),
    ("count negative", {"yaml": claim_yaml(), "count": -3}, "count"),
    ("count text", {"yaml": claim_yaml(), "count": "many"}, "count"),
    ("unknown feature", {"yaml": claim_yaml(), "features": {"Teleport": True}}, "features"),
    ("unknown node", {"yaml": claim_yaml(), "nodes": ["nowhere"]}, "nodes"),
    ("bad selector", {"yaml": claim_yaml(), "nodeSelector": "=x"}, "nodeSelector"),
    ("unknown op", {"yaml": claim_yaml(), "assume": [{"op": "explode"}]}, "assume[0].op"),
    (
        "unknown claim",
        {"yaml": claim_yaml(), "assume": [{"op": "release-claim", "claim": "a/b"}]},
        "assume[0].claim",
    ),
    ("bad field", {"yaml": claim_yaml(), "colour": "red"}, "colour"),
    (
        "bad count type",
        {"yaml": claim_yaml().replace("count: 2", "count: lots")},
        "spec.devices.requests[0].exactly.count",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("label", "body", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_400_naming_the_field(demo, api, label, body, field) -> None:
    """The response is a 400 whose field names where the problem is."""
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, (label, response.content)
    assert field in response.json()["field"], response.json()
    assert response.json()["detail"]


@pytest.mark.django_db
def test_huge_count_is_capped(demo, api) -> None:
    """A count above the cap is capped and says so."""
    response = api.post(URL, {"yaml": claim_yaml(count=1), "count": 10**9}, format="json")
    assert response.status_code == 200
    assert response.json()["summary"]["countCapped"] is True
    assert response.json()["summary"]["count"] == 10_000


@pytest.mark.django_db
def test_pod_naming_a_missing_template(demo, api) -> None:
    """A pod's unknown template is reported at its resourceClaims entry."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "nope"}]},
    }
    response = api.post(URL, {"yaml": json.dumps(pod)}, format="json")
    assert response.status_code == 400
    assert "resourceClaims[0].resourceClaimTemplateName" in response.json()["field"]
