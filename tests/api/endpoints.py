"""The list endpoints of the API and what the hand-built `cluster` fixture puts in each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """One list endpoint: its URL, the field naming an item, and the cluster's items."""

    url: str
    key: str
    expected: frozenset[str]
    # True when ?format=yaml renders the object exactly as the API server sent it.
    raw: bool = True


GPU_A = {f"gpu.example.com/node-a/gpu-{i}" for i in range(5)}
GPU_B = {f"gpu.example.com/node-b/gpu-{i}" for i in range(2)}
MIG = {f"mig.example.com/node-a-mig/{name}" for name in ("mig-1g-0", "mig-1g-1", "mig-7g")}
CLAIMS = {"train-0", "train-1", "monitor", "waiting", "mig-a", "mig-b", "net-a", "net-b"}

ENDPOINTS = [
    Endpoint("/api/inventory/nodes/", "name", frozenset({"node-a", "node-b"})),
    Endpoint("/api/inventory/device-classes/", "name", frozenset({"gpu.example.com", "h100-only"})),
    Endpoint("/api/inventory/resource-classes/", "name", frozenset({"classic-gpu"})),
    Endpoint(
        "/api/inventory/pools/",
        "name",
        frozenset({"node-a", "node-b", "node-a-mig", "node-a-net"}),
        raw=False,
    ),
    Endpoint(
        "/api/inventory/resource-slices/",
        "name",
        frozenset({"node-a-gpu", "node-b-gpu", "node-a-mig", "node-a-net"}),
    ),
    Endpoint(
        "/api/inventory/devices/",
        "key",
        frozenset(GPU_A | GPU_B | MIG | {"net.example.com/node-a-net/nic-0"}),
        raw=False,
    ),
    Endpoint("/api/inventory/counter-sets/", "name", frozenset({"gpu-0-counters"}), raw=False),
    Endpoint("/api/inventory/device-taint-rules/", "name", frozenset({"maintenance"})),
    Endpoint("/api/claims/resource-claims/", "name", frozenset(CLAIMS)),
    Endpoint("/api/claims/resource-claim-templates/", "name", frozenset({"gpu-template"})),
    Endpoint("/api/claims/pods/", "name", frozenset({"train-0-pod", "pending-pod"})),
    Endpoint("/api/claims/resource-quotas/", "name", frozenset({"gpus"})),
    Endpoint("/api/claims/pod-scheduling-contexts/", "name", frozenset({"pending-pod"})),
    Endpoint(
        "/api/claims/allocated-devices/",
        "claim_name",
        frozenset(CLAIMS - {"waiting"}),
        raw=False,
    ),
]

SYNC_ENDPOINTS = [
    Endpoint(
        "/api/inventory/sync-status/", "kind", frozenset({"ResourceSlice", "Node"}), raw=False
    ),
    Endpoint("/api/inventory/skipped-objects/", "name", frozenset({"broken"}), raw=False),
]

ALL_ENDPOINTS = ENDPOINTS + SYNC_ENDPOINTS
