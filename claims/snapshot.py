"""One consistent read of the database, turned into allocator input.

The output has the shape of a conformance scenario (`../shared/conformance/README.md`): nodes,
device classes, resource slices, and the claims already allocated, all in the Kubernetes v1 JSON
shape, so the allocator sees exactly what the scheduler would see. DeviceTaintRules are applied
to the devices they select, as the scheduler does with the DeviceTaints feature.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from claims.models import ResourceClaim
from inventory.models import DeviceClass, DeviceTaintRule, Node, ResourceSlice

JSON = dict[str, Any]


@dataclass
class ClusterState:
    """Allocator inputs read at one point in time, plus a fingerprint of that state."""

    nodes: list[JSON]
    classes: list[JSON]
    slices: list[JSON]
    allocated_claims: list[JSON]
    fingerprint: str
    classic_claims: list[str] = field(default_factory=list)

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def scenario(self, claims: list[JSON], *, features: JSON | None = None) -> JSON:
        """A scenario for the multi-node form of the allocator (`nodes`)."""
        scenario: JSON = {
            "nodes": self.nodes,
            "classes": self.classes,
            "slices": self.slices,
            "claims": claims,
            "allocatedClaims": self.allocated_claims,
        }
        if features is not None:
            scenario["features"] = features
        return scenario


@contextmanager
def consistent_read() -> Iterator[None]:
    """A read-only transaction whose queries all see the same committed state."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def _taints_by_device(rules: Iterable[DeviceTaintRule]) -> list[tuple[str, str, str, JSON]]:
    return [(r.driver, r.pool_name, r.device_name, r.taint) for r in rules if r.taint]


def _apply_taint_rules(slice_obj: JSON, rules: list[tuple[str, str, str, JSON]]) -> JSON:
    spec = slice_obj.get("spec") or {}
    driver = spec.get("driver")
    pool = (spec.get("pool") or {}).get("name")
    matching = [r for r in rules if r[0] in ("", driver) and r[1] in ("", pool)]
    if not matching:
        return slice_obj
    patched = copy.deepcopy(slice_obj)
    for device in patched["spec"].get("devices") or []:
        for _, _, device_name, taint in matching:
            if device_name in ("", device.get("name")):
                device.setdefault("taints", []).append(dict(taint))
    return patched


def read_cluster_state(*, node_names: Iterable[str] | None = None) -> ClusterState:
    """Read nodes, classes, slices and allocated claims in one consistent transaction."""
    wanted = set(node_names) if node_names is not None else None
    with consistent_read():
        nodes = [
            obj
            for name, obj in Node.objects.order_by("name").values_list("name", "obj")
            if wanted is None or name in wanted
        ]
        classes = list(DeviceClass.objects.order_by("name").values_list("obj", flat=True))
        rules = _taints_by_device(DeviceTaintRule.objects.all())
        slices = [
            _apply_taint_rules(obj, rules)
            for obj in ResourceSlice.objects.filter(classic=False)
            .order_by("name")
            .values_list("obj", flat=True)
        ]
        allocated: list[JSON] = []
        classic: list[str] = []
        for ns, name, obj, is_classic in (
            ResourceClaim.objects.filter(allocated_count__gt=0)
            .order_by("namespace", "name")
            .values_list("namespace", "name", "obj", "classic")
        ):
            if is_classic:
                classic.append(f"{ns}/{name}")
                continue
            allocated.append(obj)
        digest = hashlib.sha256()
        for model in (Node, DeviceClass, DeviceTaintRule, ResourceSlice, ResourceClaim):
            for uid, rv in model.objects.order_by("uid").values_list("uid", "resource_version"):
                digest.update(f"{uid}@{rv};".encode())
    return ClusterState(
        nodes=nodes,
        classes=classes,
        slices=slices,
        allocated_claims=allocated,
        fingerprint=digest.hexdigest(),
        classic_claims=classic,
    )
