"""Who holds the devices a pending claim could use: the claims and the pods reserving them.

The allocator's funnel (`dralib.allocator.explain`) keeps, per request, the devices that pass
everything the request asks and are stopped only by other claims: allocated to one (`already
allocated`), or their counters or consumable capacity used up (`counters or capacity`). Here
each such device is joined to its holders:

- a held device, or one whose capacity is shared out: the claims with an allocation result on it;
- a partition blocked by counters: the claims holding a device of the same pool that draws on
  one of the same counter sets (its siblings and its parent, which hold the counters).

Holders stay structured as (namespace, name) pairs, never joined into text: what a viewer may
see of other namespaces is decided where the diagnosis is shown, not here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from claims.models import AllocatedDevice, Reservation
from inventory.models import Device
from inventory.sync import chunks

JSON = dict[str, Any]
DeviceKey = tuple[str, str, str]

# Holder claims named per blocking device; more are counted, not listed.
MAX_HOLDERS_PER_DEVICE = 8


def _split(key: str) -> DeviceKey | None:
    parts = key.split("/", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def _keys_query(keys: Iterable[DeviceKey], *, driver: str, pool: str, device: str) -> Q:
    wanted = Q()
    for d, p, n in keys:
        wanted |= Q(**{driver: d, pool: p, device: n})
    return wanted


def _counter_siblings(keys: set[DeviceKey]) -> dict[DeviceKey, set[DeviceKey]]:
    """Per partition blocked by counters, the devices of its pool sharing a counter set."""
    if not keys:
        return {}
    sets: dict[DeviceKey, set[str]] = {}
    for part in chunks(sorted(keys)):
        rows = Device.objects.filter(
            _keys_query(part, driver="driver", pool="pool_name", device="name"), current=True
        ).values_list("driver", "pool_name", "name", "consumes_counters")
        for driver, pool, name, consumes in rows:
            sets[(driver, pool, name)] = {
                str(entry.get("counterSet"))
                for entry in consumes or []
                if isinstance(entry, dict) and entry.get("counterSet")
            }
    out: dict[DeviceKey, set[DeviceKey]] = {key: {key} for key in keys}
    pools = {(driver, pool) for driver, pool, _ in sets}
    for driver, pool in pools:
        members = Device.objects.filter(driver=driver, pool_name=pool, current=True).values_list(
            "name", "consumes_counters"
        )
        for name, consumes in members:
            drawn = {
                str(entry.get("counterSet"))
                for entry in consumes or []
                if isinstance(entry, dict) and entry.get("counterSet")
            }
            for key, wanted in sets.items():
                if key[:2] == (driver, pool) and drawn & wanted:
                    out[key].add((driver, pool, name))
    return out


def device_holders(taken: Iterable[JSON]) -> dict[str, JSON]:
    """For each taken device (`{"device": "driver/pool/device", "stage": ...}`), its holders:
    `{"claims": [{"namespace", "name", "pods": [{"namespace", "name"}]}], "more": n}`.

    A fixed number of queries per call (per pool for partitions blocked by counters).
    """
    stages: dict[DeviceKey, str] = {}
    for entry in taken:
        key = _split(str(entry.get("device") or ""))
        if key is not None:
            stages[key] = str(entry.get("stage") or "")
    if not stages:
        return {}
    counters = {key for key, stage in stages.items() if stage == "counters or capacity"}
    through = _counter_siblings(counters)
    looked_up: dict[DeviceKey, set[DeviceKey]] = {key: through.get(key, {key}) for key in stages}
    wanted_keys = set().union(*looked_up.values())
    held: dict[DeviceKey, set[int]] = {}
    claims: dict[int, tuple[str, str]] = {}
    for part in chunks(sorted(wanted_keys)):
        rows = AllocatedDevice.objects.filter(
            _keys_query(part, driver="driver", pool="pool", device="device")
        ).values_list("driver", "pool", "device", "claim_id", "claim__namespace", "claim__name")
        for driver, pool, device, claim_id, namespace, name in rows:
            held.setdefault((driver, pool, device), set()).add(claim_id)
            claims[claim_id] = (namespace, name)
    pods: dict[int, list[JSON]] = {}
    for part in chunks(sorted(claims)):
        reserved = Reservation.objects.filter(claim_id__in=part, resource="pods").values_list(
            "claim_id", "name"
        )
        for claim_id, pod in reserved.order_by("claim_id", "name"):
            # A pod reserving a claim lives in the claim's namespace.
            pods.setdefault(claim_id, []).append({"namespace": claims[claim_id][0], "name": pod})
    out: dict[str, JSON] = {}
    for key, through_keys in looked_up.items():
        ids = set().union(*(held.get(k, set()) for k in through_keys))
        ordered = sorted(ids, key=lambda pk: claims[pk])
        out["/".join(key)] = {
            "stage": stages[key],
            "claims": [
                {"namespace": claims[pk][0], "name": claims[pk][1], "pods": pods.get(pk, [])}
                for pk in ordered[:MAX_HOLDERS_PER_DEVICE]
            ],
            "more": max(0, len(ordered) - MAX_HOLDERS_PER_DEVICE),
        }
    return out


def with_holders(requests: list[JSON]) -> list[JSON]:
    """The diagnosis's request reports, each taken device joined to its holders."""
    taken = [entry for request in requests for entry in request.get("taken") or []]
    holders = device_holders(taken)
    out = []
    for request in requests:
        entries = []
        for entry in request.get("taken") or []:
            device = str(entry.get("device") or "")
            found = holders.get(device) or {"claims": [], "more": 0}
            entries.append({**entry, "claims": found["claims"], "more": found["more"]})
        out.append({**request, "taken": entries})
    return out
