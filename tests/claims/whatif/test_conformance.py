"""What-if over conformance scenarios loaded into the database answers as the scenario expects.

Scenarios with one `node`, at least one claim, slices named in sorted order (the database returns
them by name), no allocations given as bare device lists (those cannot be stored as objects) and
no claim that the API server's validation would refuse (two requests or subrequests of one name,
request names that are not DNS labels, ...: what-if refuses those as input, by design; a refused
claim still counts when the scenario expects an error) are loaded through the sync write path;
what-if is asked for the scenario's claims.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from claims.whatif.inputs import WhatIfError
from claims.whatif.service import what_if
from dralib.kube.normalize import NormalizeError, normalize
from tests.claims.whatif.conftest import load_objects
from tests.paths import CONFORMANCE

SCENARIOS = CONFORMANCE


def _names_unique(items: list[dict[str, Any]]) -> bool:
    names = [item.get("name") for item in items]
    return len(names) == len(set(names))


def _valid_claims(scenario: dict[str, Any]) -> bool:
    for claim in scenario.get("claims") or []:
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        if not _names_unique(requests):
            return False
        if not all(_names_unique(r.get("firstAvailable") or []) for r in requests):
            return False
    return True


def _object(raw: dict[str, Any], *, kind: str, api_version: str, index: int) -> dict[str, Any]:
    obj = copy.deepcopy(raw)
    obj["apiVersion"], obj["kind"] = api_version, kind
    meta = obj.setdefault("metadata", {})
    meta.setdefault("uid", f"{kind}-{index}-{meta.get('name')}")
    if kind == "ResourceClaim":
        meta.setdefault("namespace", "default")
    return obj


def _accepted(case: dict[str, Any]) -> bool:
    """Whether the API server would accept the claims asked about.

    Upstream's table builds objects directly, some with names validation refuses (`subReq-0`)
    or fields it refuses (`count` with allocationMode All); what-if refuses such input. That
    is the answer when the scenario expects an error anyway.
    """
    if case["expect"].get("error"):
        return True
    try:
        for index, raw in enumerate(case["scenario"].get("claims") or []):
            obj = _object(raw, kind="ResourceClaim", api_version="resource.k8s.io/v1", index=index)
            normalize(obj, validate=True)
    except NormalizeError:
        return False
    return True


def _usable(path: Path) -> bool:
    case = json.loads(path.read_text())
    scenario = case["scenario"]
    names = [(s.get("metadata") or {}).get("name") for s in scenario.get("slices") or []]
    return (
        bool(scenario.get("node"))
        and bool(scenario.get("claims"))
        and not any(
            scenario.get(k)
            for k in ("allocatedDevices", "allocatedSharedDevices", "allocatedCapacity")
        )
        and len(names) == len(set(names))
        and names == sorted(names)
        and _valid_claims(scenario)
        and _accepted(case)
    )


FILES = sorted(p for p in SCENARIOS.glob("*.json") if _usable(p)) if SCENARIOS.exists() else []


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _strip(v) for k, v in value.items() if k != "shareID"}
        return {k: v for k, v in out.items() if v not in (None, [], {}, "")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_scenarios_found() -> None:
    """The shared scenarios are there and most qualify."""
    assert len(FILES) > 100


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_what_if_matches_scenario(path: Path) -> None:
    """Fit, devices and nodeSelector equal the scenario's expect; an expected error is an error."""
    case = json.loads(path.read_text())
    scenario, expect = case["scenario"], case["expect"]
    objects = [_object(scenario["node"], kind="Node", api_version="v1", index=0)]
    for index, raw in enumerate(scenario.get("classes") or []):
        objects.append(
            _object(raw, kind="DeviceClass", api_version="resource.k8s.io/v1", index=index)
        )
    for index, raw in enumerate(scenario.get("slices") or []):
        objects.append(
            _object(raw, kind="ResourceSlice", api_version="resource.k8s.io/v1", index=index)
        )
    for index, raw in enumerate(scenario.get("allocatedClaims") or []):
        objects.append(
            _object(raw, kind="ResourceClaim", api_version="resource.k8s.io/v1", index=index)
        )
    load_objects(objects)
    claims = [
        _object(
            {k: v for k, v in c.items() if k != "status"},
            kind="ResourceClaim",
            api_version="resource.k8s.io/v1",
            index=i,
        )
        for i, c in enumerate(scenario["claims"])
    ]
    features = scenario.get("features")
    try:
        answer = what_if(claims, features=features, use_cache=False)
    except WhatIfError:
        assert expect["error"], "what-if refused a question the allocator answers"
        return
    node = answer["nodes"][0]
    if expect["error"]:
        assert node.get("error"), "the allocator fails here; what-if must say so"
        return
    assert node["fits"] == (expect["results"] is not None)
    if node["fits"]:
        got = [
            {
                "devices": [{k: v for k, v in d.items() if k != "claim"} for d in c["devices"]],
                "nodeSelector": c["nodeSelector"],
            }
            for c in node["claims"]
        ]
        want = [
            {"devices": r["devices"]["results"], "nodeSelector": r.get("nodeSelector")}
            for r in expect["results"]
        ]
        assert _strip(got) == _strip(want)


@pytest.mark.django_db
def test_claims_with_duplicate_request_names_are_refused_as_input() -> None:
    """A claim the API server would refuse (requests named twice) is a what-if input error."""
    name = "list-attributes-match-constaint-list-of-string-values-without-common-elements"
    path = SCENARIOS / f"{name}.json"
    claim = _object(
        json.loads(path.read_text())["scenario"]["claims"][0],
        kind="ResourceClaim",
        api_version="resource.k8s.io/v1",
        index=0,
    )
    with pytest.raises(WhatIfError) as error:
        what_if([claim])
    assert "requests[1].name" in str(error.value.field) + str(error.value.message)
