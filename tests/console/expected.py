"""Expected metric values computed straight from the scenario objects, without dashboard code.

Rules (resource.k8s.io semantics): only the highest generation of a pool counts; a device is
allocated when a non admin-access allocation result names it; it is tainted when not allocated
and it or a DeviceTaintRule carries a taint whose effect is not None.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

JSON = dict[str, Any]
SCENARIO = Path(__file__).with_name("demo_cluster.yaml")
_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_SUFFIXES.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})


def load_objects() -> list[JSON]:
    return list(yaml.safe_load(SCENARIO.read_text()))


def quantity(text: str) -> Fraction:
    """The handful of quantity spellings the scenario uses (integer with a unit suffix)."""
    digits = text.rstrip("kKMGTi")
    return Fraction(int(digits)) * _SUFFIXES[text[len(digits) :]]


def of_kind(objects: list[JSON], kind: str) -> list[JSON]:
    return [o for o in objects if o["kind"] == kind]


def current_slices(objects: list[JSON]) -> list[JSON]:
    """Slices of the highest generation of their pool."""
    slices = of_kind(objects, "ResourceSlice")
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), s["spec"]["pool"]["generation"])
    return [
        s
        for s in slices
        if s["spec"]["pool"]["generation"]
        == newest[(s["spec"]["driver"], s["spec"]["pool"]["name"])]
    ]


def current_devices(objects: list[JSON]) -> list[tuple[str, str, JSON]]:
    """(driver, pool, device) for devices in the highest generation of their pool."""
    return [
        (s["spec"]["driver"], s["spec"]["pool"]["name"], device)
        for s in current_slices(objects)
        for device in s["spec"].get("devices", [])
    ]


def allocation_results(objects: list[JSON]) -> list[JSON]:
    results = []
    for claim in of_kind(objects, "ResourceClaim"):
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results.extend(allocation.get("devices", {}).get("results", []))
    return results


def held(objects: list[JSON]) -> set[tuple[str, str, str]]:
    return {
        (r["driver"], r["pool"], r["device"])
        for r in allocation_results(objects)
        if not r.get("adminAccess")
    }


def _tainted(objects: list[JSON], driver: str, pool: str, device: JSON) -> bool:
    if any(t.get("effect") != "None" for t in device.get("taints", [])):
        return True
    for rule in of_kind(objects, "DeviceTaintRule"):
        selector = rule["spec"]["deviceSelector"]
        wanted = {"driver": driver, "pool": pool, "device": device["name"]}
        if rule["spec"]["taint"]["effect"] != "None" and all(
            selector.get(field) in (None, "", value) for field, value in wanted.items()
        ):
            return True
    return False


def pool_devices(objects: list[JSON]) -> dict[tuple[str, str], dict[str, int]]:
    """{(driver, pool): {total, allocated, tainted, free}}."""
    taken = held(objects)
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"total": 0, "allocated": 0, "tainted": 0, "free": 0}
    )
    for driver, pool, device in current_devices(objects):
        entry = counts[(driver, pool)]
        entry["total"] += 1
        if (driver, pool, device["name"]) in taken:
            entry["allocated"] += 1
        elif _tainted(objects, driver, pool, device):
            entry["tainted"] += 1
        else:
            entry["free"] += 1
    return dict(counts)


def _gpu_memory_at_least_40gi(driver: str, device: JSON) -> bool:
    memory = (device.get("capacity") or {}).get("memory")
    return (
        driver == "gpu.example.com"
        and memory is not None
        and (quantity(memory["value"]) >= quantity("40Gi"))
    )


# The scenario's selectors that are more than a driver check, written out by hand.
CLASS_PREDICATES = {"big-gpu": _gpu_memory_at_least_40gi}


def _class_predicate(device_class: JSON) -> Callable[[str, JSON], bool]:
    name = device_class["metadata"]["name"]
    if name in CLASS_PREDICATES:
        return CLASS_PREDICATES[name]
    [selector] = device_class["spec"]["selectors"]
    expression = selector["cel"]["expression"]
    prefix = 'device.driver == "'
    assert expression.startswith(prefix) and expression.count('"') == 2, expression
    wanted = expression[len(prefix) : -1]
    return lambda driver, _: driver == wanted


def blocked(objects: list[JSON]) -> set[tuple[str, str, str]]:
    """Devices not held whose consumesCounters the counters their pool has left cannot cover."""
    left: dict[tuple[str, str, str, str], Fraction] = {}
    for s in current_slices(objects):
        for counter_set in s["spec"].get("sharedCounters", []):
            for name, amount in counter_set["counters"].items():
                key = (s["spec"]["driver"], s["spec"]["pool"]["name"], counter_set["name"], name)
                left[key] = quantity(amount["value"])
    taken = held(objects)

    def uses(driver: str, pool: str, device: JSON) -> list[tuple[tuple[str, ...], Fraction]]:
        return [
            ((driver, pool, use["counterSet"], name), quantity(amount["value"]))
            for use in device.get("consumesCounters", [])
            for name, amount in use["counters"].items()
        ]

    for driver, pool, device in current_devices(objects):
        if (driver, pool, device["name"]) in taken:
            for key, amount in uses(driver, pool, device):
                left[key] -= amount
    # As upstream's allocator: a counter of the pool already overdrawn by the holders blocks
    # every consumer of the pool; counters the pool does not declare are not checked.
    overdrawn = {key[:2] for key, amount in left.items() if amount < 0}
    return {
        (driver, pool, device["name"])
        for driver, pool, device in current_devices(objects)
        if (driver, pool, device["name"]) not in taken
        and uses(driver, pool, device)
        and (
            (driver, pool) in overdrawn
            or any(key in left and amount > left[key] for key, amount in uses(driver, pool, device))
        )
    }


def class_devices(objects: list[JSON]) -> dict[str, dict[str, int]]:
    """{class: {total, allocated, tainted, blocked, free}} over the devices every selector
    matches; free means a new claim could get the device now."""
    taken = held(objects)
    stuck = blocked(objects)
    result = {}
    for device_class in of_kind(objects, "DeviceClass"):
        member = _class_predicate(device_class)
        totals = {"total": 0, "allocated": 0, "tainted": 0, "blocked": 0, "free": 0}
        for driver, pool, device in current_devices(objects):
            if not member(driver, device):
                continue
            totals["total"] += 1
            if (driver, pool, device["name"]) in taken:
                totals["allocated"] += 1
            elif _tainted(objects, driver, pool, device):
                totals["tainted"] += 1
            elif (driver, pool, device["name"]) in stuck:
                totals["blocked"] += 1
            else:
                totals["free"] += 1
        result[device_class["metadata"]["name"]] = totals
    return result


def class_pending_claims(objects: list[JSON]) -> dict[str, int]:
    """{class: pending claims naming it in a request or an alternative}, every class present."""
    counts = {c["metadata"]["name"]: 0 for c in of_kind(objects, "DeviceClass")}
    for claim in of_kind(objects, "ResourceClaim"):
        if (claim.get("status") or {}).get("allocation"):
            continue
        names = set()
        for request in claim["spec"]["devices"].get("requests", []):
            for choice in [request.get("exactly") or {}, *request.get("firstAvailable", [])]:
                if choice.get("deviceClassName"):
                    names.add(choice["deviceClassName"])
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return counts


def counters(objects: list[JSON]) -> dict[tuple[str, str, str], tuple[Fraction, Fraction]]:
    """{(driver, pool, counter): (capacity, consumed by held devices)} over current slices."""
    capacity: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    consumed: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    for s in current_slices(objects):
        key = (s["spec"]["driver"], s["spec"]["pool"]["name"])
        for counter_set in s["spec"].get("sharedCounters", []):
            for name, amount in counter_set["counters"].items():
                capacity[(*key, name)] += quantity(amount["value"])
    taken = held(objects)
    for driver, pool, device in current_devices(objects):
        if (driver, pool, device["name"]) not in taken:
            continue
        for use in device.get("consumesCounters", []):
            for name, amount in use["counters"].items():
                consumed[(driver, pool, name)] += quantity(amount["value"])
    return {key: (capacity[key], consumed[key]) for key in capacity}


def consumable_capacity(
    objects: list[JSON],
) -> dict[tuple[str, str, str], tuple[Fraction, Fraction]]:
    """{(driver, pool, capacity): (sum over shareable devices, consumedCapacity of allocations)}."""
    capacity: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    consumed: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    shareable = set()
    for driver, pool, device in current_devices(objects):
        if device.get("allowMultipleAllocations"):
            shareable.add((driver, pool, device["name"]))
            for name, spec in device.get("capacity", {}).items():
                capacity[(driver, pool, name)] += quantity(spec["value"])
    for result in allocation_results(objects):
        if result.get("adminAccess"):
            continue
        if (result["driver"], result["pool"], result["device"]) not in shareable:
            continue
        for name, amount in result.get("consumedCapacity", {}).items():
            consumed[(result["driver"], result["pool"], name)] += quantity(amount)
    return {key: (capacity[key], consumed[key]) for key in capacity}


def pending_claims(objects: list[JSON], now: datetime) -> dict[str, tuple[int, float, str]]:
    """{namespace: (pending claims, age in seconds of the oldest, its name)}."""
    created: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for claim in of_kind(objects, "ResourceClaim"):
        if (claim.get("status") or {}).get("allocation"):
            continue
        stamp = claim["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        created[claim["metadata"]["namespace"]].append(
            (datetime.fromisoformat(stamp), claim["metadata"]["name"])
        )
    result = {}
    for namespace, claims in created.items():
        oldest, name = min(claims)
        result[namespace] = (len(claims), (now - oldest).total_seconds(), name)
    return result
