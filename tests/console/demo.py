"""Load the demo cluster through the sync write path, as the watchers would."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from demo.generator import generate_demo_cluster
from inventory.sync import HANDLERS, upsert_events

# Referenced kinds first, so that every page sees a consistent cluster after each batch.
KIND_ORDER = (
    "DeviceClass",
    "Node",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
    "ResourceQuota",
)


def load_demo(*, nodes: int, seed: int, publish: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Generate a demo cluster and upsert it kind by kind; returns the raw objects per kind."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in generate_demo_cluster(nodes=nodes, seed=seed):
        by_kind[str(obj.get("kind"))].append(obj)
    for kind in (*KIND_ORDER, *sorted(set(by_kind) - set(KIND_ORDER))):
        if kind in HANDLERS and by_kind.get(kind):
            result = upsert_events(kind, [(raw, None) for raw in by_kind[kind]], publish=publish)
            assert not result.skipped, f"{kind}: {result.skipped[:3]}"
    return dict(by_kind)


def allocate(claim: dict[str, Any], *, driver: str, pool: str, device: str) -> dict[str, Any]:
    """A copy of a pending claim, allocated to one device: what the scheduler would write."""
    spec_requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    request = str(spec_requests[0]["name"]) if spec_requests else "req"
    allocated = {**claim, "metadata": {**claim["metadata"]}}
    version = str(claim["metadata"].get("resourceVersion") or "1")
    allocated["metadata"]["resourceVersion"] = f"{version}9"
    allocated["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": request, "driver": driver, "pool": pool, "device": device}]
            }
        }
    }
    return allocated


def pending_claim(objects: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The first demo claim without an allocation."""
    for claim in objects["ResourceClaim"]:
        if not (claim.get("status") or {}).get("allocation"):
            return claim
    raise LookupError("the demo cluster has no pending claim")
