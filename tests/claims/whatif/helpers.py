"""Helpers shared by the what-if tests: YAML claims and the allocator asked directly."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from claims.whatif.listing import list_cluster
from dralib.allocator import allocate_scenario

URL = "/api/claims/what-if/"


def claim_yaml(
    *,
    name: str = "two-gpus",
    count: int = 2,
    device_class: str = "gpu.example.com",
    namespace: str = "team-a",
    selector: str | None = None,
) -> str:
    """A v1 ResourceClaim asking for `count` devices of a class, as YAML text."""
    # As the API server stores it: the allocator, like upstream's, refuses an empty mode.
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
    )


def claim_object(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)


def device_keys(results: list[dict[str, Any]] | None) -> list[tuple[str, str, str, str]]:
    """(request, driver, pool, device) of allocation results, in order, share IDs ignored."""
    out = []
    for allocation in results or []:
        for result in (allocation.get("devices") or {}).get("results") or []:
            out.append((result["request"], result["driver"], result["pool"], result["device"]))
    return out


def answer_keys(entry: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [
        (d["request"], d["driver"], d["pool"], d["device"])
        for claim in entry.get("claims") or []
        for d in claim["devices"]
    ]


def direct(claims: list[dict[str, Any]], *, mutate=None) -> dict[str, dict[str, Any]]:
    """The allocator's own answer per node for the stored cluster (optionally changed first)."""
    state = list_cluster()
    scenario = copy.deepcopy(state.scenario(claims))
    if mutate is not None:
        mutate(scenario)
    output = allocate_scenario(scenario)
    return {entry["node"]: entry for entry in output["nodes"]}
