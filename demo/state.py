"""The demo cluster's current state: every object, and the allocator that places claims in it.

`ClusterState` is shared by the generator (which builds a cluster through it) and the churn loop
(which rebuilds it from a list of objects). Allocation is the real allocator's
(`demo.allocation`), fed as the scheduler feeds it: the current slices, classes, taint rules and
allocated claims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from demo.allocation import ALLOCATOR_INPUTS, DemoAllocator
from demo.catalog import CLAIM_FINALIZER, GPU_DRIVER, DemoError
from demo.topology import parent_gpu

ObjKey = tuple[str, str, str]

KIND_ORDER = (
    "Namespace",
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
    "ResourceQuota",
)


def object_key(obj: dict[str, Any]) -> ObjKey:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise DemoError(f"{obj.get('kind', '?')} object: metadata.name is missing")
    return (str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta["name"]))


def node_is_ready(node: dict[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


class ClusterState:
    """Objects by (kind, namespace, name), slices by pool, and the allocator over them."""

    def __init__(self, *, share_id_factory: Callable[[], str]) -> None:
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self.by_kind: dict[str, dict[ObjKey, None]] = {kind: {} for kind in KIND_ORDER}
        self.pool_slices: dict[tuple[str, str], dict[ObjKey, None]] = {}
        self.allocator = DemoAllocator(self.objects_of_kind, share_id_factory=share_id_factory)

    def add(self, obj: dict[str, Any]) -> ObjKey:
        """Store a new or replaced object and refresh what depends on it."""
        key = object_key(obj)
        kind = key[0]
        self.objects[key] = obj
        self.by_kind.setdefault(kind, {})[key] = None
        if kind == "ResourceSlice":
            self.pool_slices.setdefault(_slice_pool(obj), {})[key] = None
        self._changed(key, obj)
        return key

    def remove(self, key: ObjKey) -> dict[str, Any]:
        """Drop an object; a claim's devices are released, a slice's pool re-read."""
        obj = self.objects.pop(key)
        self.by_kind[key[0]].pop(key, None)
        if key[0] == "ResourceSlice":
            self.pool_slices.get(_slice_pool(obj), {}).pop(key, None)
        self._changed(key, None)
        return obj

    def _changed(self, key: ObjKey, obj: dict[str, Any] | None) -> None:
        if key[0] in ALLOCATOR_INPUTS:
            self.allocator.inputs_changed()
        elif key[0] == "ResourceClaim":
            self.allocator.claim_changed(key, obj)

    def keys(self, kind: str) -> list[ObjKey]:
        return list(self.by_kind.get(kind, {}))

    def objects_of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [self.objects[key] for key in self.by_kind.get(kind, {})]

    def ordered_objects(self) -> list[dict[str, Any]]:
        """Every object, grouped by kind in dependency order (namespaces and nodes first)."""
        kinds = [*KIND_ORDER, *sorted(set(self.by_kind) - set(KIND_ORDER))]
        return [self.objects[key] for kind in kinds for key in self.by_kind.get(kind, {})]

    def allocate(
        self, claims: list[dict[str, Any]], *, node: str, now: str
    ) -> list[dict[str, Any]] | None:
        """`status.allocation` for each claim, allocated together for a pod on `node`, or None.

        Nothing is held yet: the devices count as allocated once the claims are stored with
        their allocation.
        """
        node_obj = self.objects.get(("Node", "", node))
        if node_obj is None:
            return None
        results = self.allocator.allocate(claims, node_obj)
        if results is None:
            return None
        # The scheduler stamps the allocation when it writes it.
        return [{**result, "allocationTimestamp": now} for result in results]

    def gpus_in_use(self, node: str) -> int:
        """GPUs of a node held whole or through any partition."""
        return len(
            {parent_gpu(name) for name in self.allocator.dedicated_devices(GPU_DRIVER, node)}
        )


def _slice_pool(resource_slice: dict[str, Any]) -> tuple[str, str]:
    spec = resource_slice.get("spec") or {}
    return (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))


def allocated_claim(claim: dict[str, Any], allocation: dict[str, Any]) -> dict[str, Any]:
    """Copy of a claim with an allocation and the finalizer the scheduler adds with it."""
    updated = {
        **claim,
        "metadata": dict(claim["metadata"]),
        "status": dict(claim.get("status") or {}),
    }
    updated["metadata"]["finalizers"] = [CLAIM_FINALIZER]
    updated["status"]["allocation"] = allocation
    return updated
