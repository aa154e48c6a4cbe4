"""A claim's allocated devices and reservations are rewritten only when its status changed, and
always equal what its stored status makes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from claims.models import AllocatedDevice, Reservation, ResourceClaim
from claims.sync import claim_children
from inventory.sync import apply_events

CHILD_TABLES = ('"claims_allocateddevice"', '"claims_reservation"')


def _claim(
    name: str,
    *,
    rv: int,
    devices: Sequence[str] = (),
    consumers: Sequence[str] = (),
    uid: str = "",
    labels: dict[str, str] | None = None,
    ready: bool | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv),
            "labels": labels or {},
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    status: dict[str, Any] = {}
    if devices:
        results = [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": d}
            for d in devices
        ]
        status["allocation"] = {"devices": {"results": results}}
        if ready is not None:
            condition = {"type": "Ready", "status": str(ready)}
            status["devices"] = [
                {
                    "driver": "gpu.example.com",
                    "pool": "node-a",
                    "device": d,
                    "conditions": [condition],
                }
                for d in devices
            ]
    if consumers:
        status["reservedFor"] = [
            {"resource": "pods", "name": c, "uid": f"uid-pod-{c}"} for c in consumers
        ]
    if status:
        obj["status"] = status
    return obj


def _child_writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].startswith(("DELETE", "INSERT", "COPY"))
        and any(table in q["sql"] for table in CHILD_TABLES)
    ]


def _row_pks() -> tuple[dict[str, int], dict[str, int]]:
    return (
        dict(AllocatedDevice.objects.values_list("claim__name", "pk")),
        dict(Reservation.objects.values_list("claim__name", "pk")),
    )


@pytest.mark.django_db
def test_claims_whose_status_is_unchanged_keep_their_rows() -> None:
    """Updates that change only labels write no device or reservation row; of a batch where a
    third change their allocation, only those claims' rows are replaced."""
    names = [f"c{i}" for i in range(30)]

    def batch(rv: int, labels: dict[str, str], moved: set[str]) -> list[tuple[str, Any]]:
        return [
            (
                "MODIFIED" if rv > 1 else "ADDED",
                _claim(
                    name,
                    rv=rv,
                    devices=[f"{name}-new" if name in moved else name],
                    consumers=[f"{name}-new" if name in moved else name],
                    labels=labels,
                ),
            )
            for name in names
        ]

    apply_events("ResourceClaim", batch(1, {}, set()))
    devices, reservations = _row_pks()
    with CaptureQueriesContext(connection) as queries:
        result = apply_events("ResourceClaim", batch(2, {"team": "a"}, set()))
    assert result.upserted == len(names)
    assert _child_writes(queries) == []
    assert _row_pks() == (devices, reservations)
    assert {row["team"] for row in ResourceClaim.objects.values_list("labels", flat=True)} == {"a"}

    moved = set(names[::3])
    with CaptureQueriesContext(connection) as queries:
        apply_events("ResourceClaim", batch(3, {"team": "b"}, moved))
    assert _child_writes(queries)
    after_devices, after_reservations = _row_pks()
    assert {name for name, pk in after_devices.items() if pk != devices[name]} == moved
    assert {name for name, pk in after_reservations.items() if pk != reservations[name]} == moved
    assert after_devices.keys() == after_reservations.keys() == set(names)
    assert set(
        AllocatedDevice.objects.filter(claim__name__in=moved).values_list("device", flat=True)
    ) == {f"{name}-new" for name in moved}


def _stored(claim: ResourceClaim) -> tuple[list[str], list[str]]:
    fields = [f.attname for f in AllocatedDevice._meta.concrete_fields if not f.primary_key]
    devices = sorted(
        repr(sorted((k, v) for k, v in row.items() if k not in ("claim_id", "cluster_id")))
        for row in AllocatedDevice.objects.filter(claim=claim).values(*fields)
    )
    fields = [f.attname for f in Reservation._meta.concrete_fields if not f.primary_key]
    reservations = sorted(
        repr(sorted((k, v) for k, v in row.items() if k not in ("claim_id", "cluster_id")))
        for row in Reservation.objects.filter(claim=claim).values(*fields)
    )
    return devices, reservations


def _from_scratch(claim: ResourceClaim) -> tuple[list[str], list[str]]:
    devices, reservations = claim_children(claim.obj)
    return (
        sorted(repr(sorted(row.items())) for row in devices),
        sorted(repr(sorted(row.items())) for row in reservations),
    )


@pytest.mark.django_db
def test_random_claim_changes_leave_the_rows_a_fresh_computation_makes() -> None:
    """After every batch of random claim changes (allocation, reservations, device conditions,
    labels alone, deletes, recreates under a new uid), each claim's stored rows equal those
    computed from scratch from its stored object."""
    rng = random.Random(25)
    names = [f"c{i}" for i in range(12)]
    uids = {name: f"uid-{name}" for name in names}
    rv = 1
    rewrites = 0
    for _ in range(40):
        events: list[tuple[str, Any]] = []
        for name in rng.sample(names, rng.randint(1, len(names))):
            rv += 1
            change = rng.random()
            if change < 0.1:
                events.append(("DELETED", _claim(name, rv=rv, uid=uids[name])))
                continue
            if change < 0.15:
                uids[name] = f"uid-{name}-{rv}"
            devices = rng.sample(["gpu-0", "gpu-1", "gpu-2"], rng.randint(0, 2))
            consumers = rng.sample(["p0", "p1"], rng.randint(0, 2)) if devices else []
            ready = rng.choice([None, True, False])
            labels = {"round": str(rng.randint(0, 2))}
            events.append(
                (
                    "MODIFIED",
                    _claim(
                        name,
                        rv=rv,
                        uid=uids[name],
                        devices=devices,
                        consumers=consumers,
                        ready=ready,
                        labels=labels,
                    ),
                )
            )
        with CaptureQueriesContext(connection) as queries:
            apply_events("ResourceClaim", events)
        rewrites += bool(_child_writes(queries))
        for claim in ResourceClaim.objects.all():
            assert _stored(claim) == _from_scratch(claim), claim.name
    assert rewrites > 0
    assert Reservation.objects.exists() and AllocatedDevice.objects.exists()
