"""Physical units on the 1,000-node demo cluster, counted here from the raw objects with the
demo's own class rules, against the API; the overview, the node page, /metrics and the devices
list show the API's numbers.

The cluster is generated and loaded once for the module (about 23,000 objects) inside a
transaction that is rolled back afterwards; each test runs in a savepoint inside it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from claims.devices.availability import forget_units
from claims.devices.classes import forget_membership
from console.metrics import as_samples, render_metrics
from demo.catalog import DEVICE_CLASSES, FABRIC_DRIVER, GPU_DRIVER, NIC_DRIVER
from inventory.clusters import in_cluster
from tests.console.demo import load_demo

JSON = dict[str, Any]
NODES = 1000
URL = "/api/inventory/availability/"


def _attribute(device: JSON, name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None)


# The demo's DeviceClasses (demo/catalog.py) as plain predicates over (driver, device).
RULES: dict[str, Callable[[str, JSON], bool]] = {
    GPU_DRIVER: lambda d, dev: d == GPU_DRIVER and _attribute(dev, "type") == "gpu",
    "gpu-h100": lambda d, dev: (
        d == GPU_DRIVER and _attribute(dev, "type") == "gpu" and _attribute(dev, "model") == "h100"
    ),
    "mig-1g.10gb": lambda d, dev: (
        d == GPU_DRIVER
        and _attribute(dev, "type") == "mig"
        and _attribute(dev, "profile") == "1g.10gb"
    ),
    NIC_DRIVER: lambda d, dev: d == NIC_DRIVER,
    FABRIC_DRIVER: lambda d, dev: d == FABRIC_DRIVER,
}


def _amount(text: str) -> Fraction:
    match = re.fullmatch(r"(\d+)(Gi)?", text)
    assert match, text
    return Fraction(int(match.group(1)) * (2**30 if match.group(2) else 1))


def _consumes(device: JSON) -> dict[tuple[str, str], Fraction]:
    need: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for entry in device.get("consumesCounters") or []:
        for counter, amount in entry["counters"].items():
            need[(entry["counterSet"], counter)] += _amount(amount["value"])
    return need


def expected(objects: dict[str, list[JSON]], *, node: str = "") -> dict[str, JSON]:
    """Per class, from the raw slices and claims: units (a device without consumesCounters, or
    one counter set per pool), free units, devices and 1g.10gb partitions, total and free."""
    newest: dict[tuple[str, str], int] = {}
    for piece in objects["ResourceSlice"]:
        pool = piece["spec"]["pool"]
        key = (piece["spec"]["driver"], pool["name"])
        newest[key] = max(newest.get(key, 0), int(pool["generation"]))
    devices: list[tuple[str, str, str | None, JSON]] = []
    capacity: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = defaultdict(dict)
    for piece in objects["ResourceSlice"]:
        spec = piece["spec"]
        pool = (spec["driver"], spec["pool"]["name"])
        if int(spec["pool"]["generation"]) != newest[pool]:
            continue
        for counter_set in spec.get("sharedCounters") or []:
            for counter, amount in counter_set["counters"].items():
                capacity[pool][(counter_set["name"], counter)] = _amount(amount["value"])
        for device in spec.get("devices") or []:
            devices.append((*pool, spec.get("nodeName"), device))
    held: set[tuple[str, str, str]] = set()
    for claim in objects["ResourceClaim"]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if not result.get("adminAccess"):
                held.add((result["driver"], result["pool"], result["device"]))
    rules = [rule["spec"] for rule in objects.get("DeviceTaintRule", [])]

    def tainted(driver: str, pool: str, device: JSON) -> bool:
        effects = {t.get("effect") for t in device.get("taints") or []}
        for rule in rules:
            chosen = rule.get("deviceSelector") or {}
            if all(
                chosen.get(k) in (None, v)
                for k, v in (("driver", driver), ("pool", pool), ("device", device["name"]))
            ):
                effects.add(rule["taint"]["effect"])
        return bool(effects & {"NoSchedule", "NoExecute"})

    left = {pool: dict(counters) for pool, counters in capacity.items()}
    for driver, pool, _, device in devices:
        if (driver, pool, device["name"]) in held:
            for key, value in _consumes(device).items():
                left[(driver, pool)][key] -= value
    answer: dict[str, JSON] = {}
    for name, rule in RULES.items():
        units: dict[tuple[str, str, str], list[bool]] = {}  # unit -> [taken, a free member]
        selected: set[tuple[str, str, str]] = set()
        partitions = {"total": 0, "free": 0}
        counted = {"total": 0, "free": 0}
        for driver, pool, where, device in devices:
            if node and where != node:
                continue
            sets = sorted({c["counterSet"] for c in device.get("consumesCounters") or []})
            key = (driver, pool, sets[0] if sets else "device:" + device["name"])
            unit = units.setdefault(key, [False, False])
            taken = (driver, pool, device["name"]) in held
            unit[0] = unit[0] or taken
            if not rule(driver, device):
                continue
            selected.add(key)
            need = _consumes(device)
            fits = all(left[(driver, pool)][k] >= value for k, value in need.items())
            free = not taken and not tainted(driver, pool, device) and fits
            unit[1] = unit[1] or free
            counted["total"] += 1
            counted["free"] += free
            if sets and _attribute(device, "profile"):
                partitions["total"] += 1
                partitions["free"] += free
        answer[name] = {
            "physical": {
                "total": len(selected),
                "free": sum(1 for key in selected if units[key][1] and not units[key][0]),
            },
            "devices": counted,
            "partitions": partitions,
        }
    return answer


@pytest.fixture(scope="module")
def big_demo(django_db_setup, django_db_blocker) -> Iterator[dict[str, list[JSON]]]:
    """The 1,000-node demo in the database for the whole module, rolled back at its end."""
    with django_db_blocker.unblock(), transaction.atomic(), in_cluster():
        forget_membership()
        forget_units()
        yield load_demo(nodes=NODES, seed=1)
        transaction.set_rollback(True)
    forget_membership()
    forget_units()


@pytest.fixture
def demo(big_demo, db) -> dict[str, list[JSON]]:
    return big_demo


@pytest.fixture(scope="module")
def wanted(big_demo) -> dict[str, JSON]:
    """Per class, the expected counts over the whole cluster (computed once)."""
    return expected(big_demo)


def sample_nodes(objects: dict[str, list[JSON]]) -> list[str]:
    """A few nodes of each kind: the first with MIG partitions, with H100s, with other GPUs,
    with only NICs or fabric, so that each class is seen locally."""
    kinds: dict[str, list[str]] = defaultdict(list)
    for piece in objects["ResourceSlice"]:
        node = piece["spec"].get("nodeName")
        if not node:
            continue
        for device in piece["spec"].get("devices") or []:
            for name, rule in RULES.items():
                if rule(piece["spec"]["driver"], device):
                    kinds[name].append(node)
    return sorted({min(nodes) for nodes in kinds.values()} | {max(kinds[GPU_DRIVER])})


def test_the_rules_cover_every_demo_class() -> None:
    """A new demo class needs its rule here before these tests mean anything."""
    assert set(RULES) == set(DEVICE_CLASSES)


def test_units_match_the_raw_slices(demo, wanted, api) -> None:
    """For every class: units, free units, devices and partitions as counted from the raw
    objects; a unit holding an allocated device is never free."""
    answer = {e["deviceClass"]: e for e in api.get(URL).json()["results"]}
    assert set(answer) == set(wanted)
    for name, entry in answer.items():
        assert entry["physical"] == wanted[name]["physical"], name
        assert entry["devices"] == wanted[name]["devices"], name
        shown = {"total": 0, "free": 0}
        for partition in entry["partitions"]:
            shown["total"] += partition["total"]
            shown["free"] += partition["free"]
        assert shown == wanted[name]["partitions"], name
    # The demo's shape: every H100 counted once, MIG GPUs as units of the MIG class.
    assert answer["gpu-h100"]["physical"]["total"] == answer["gpu-h100"]["devices"]["total"]
    mig = answer["mig-1g.10gb"]
    assert mig["devices"]["total"] == 7 * mig["physical"]["total"] > 0
    assert [p["profile"] for p in mig["partitions"]] == ["1g.10gb"]
    assert mig["physical"]["free"] < mig["physical"]["total"]


def test_units_on_one_node_match_the_raw_slices(demo, api) -> None:
    """?node= counts the units local to the node, for a MIG node and a plain one."""
    for node in sample_nodes(demo):
        answer = {e["deviceClass"]: e for e in api.get(URL, {"node": node}).json()["results"]}
        wanted = expected(demo, node=node)
        for name, entry in answer.items():
            assert entry["physical"] == wanted[name]["physical"], (node, name)


def test_no_free_unit_holds_an_allocated_device(demo, wanted, api) -> None:
    """Per class, free units are at most the units holding no allocated device (counted from
    the raw claims), and the demo holds some of every GPU class, so the bound is tested."""
    held_units = _held_units(demo)
    answer = {e["deviceClass"]: e for e in api.get(URL).json()["results"]}
    for name in (GPU_DRIVER, "gpu-h100", "mig-1g.10gb"):
        held = held_units[name]
        assert held > 0, name
        physical = answer[name]["physical"]
        assert physical["free"] <= physical["total"] - held, name


def _held_units(objects: dict[str, list[JSON]]) -> dict[str, int]:
    """Per class, the units (a device, or a pool's counter set) holding an allocated device."""
    held = {
        (r["driver"], r["pool"], r["device"])
        for claim in objects["ResourceClaim"]
        for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        )
        or []
        # Admin access reads a device without taking it (upstream's allocator skips these).
        if not r.get("adminAccess")
    }
    newest: dict[tuple[str, str], int] = {}
    for piece in objects["ResourceSlice"]:
        key = (piece["spec"]["driver"], piece["spec"]["pool"]["name"])
        newest[key] = max(newest.get(key, 0), int(piece["spec"]["pool"]["generation"]))
    units: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    holding: set[tuple[str, str, str]] = set()
    for piece in objects["ResourceSlice"]:
        spec = piece["spec"]
        driver, pool = spec["driver"], spec["pool"]["name"]
        if int(spec["pool"]["generation"]) != newest[(driver, pool)]:
            continue
        for device in spec.get("devices") or []:
            sets = sorted({c["counterSet"] for c in device.get("consumesCounters") or []})
            unit = (driver, pool, sets[0] if sets else "device:" + device["name"])
            if (driver, pool, device["name"]) in held:
                holding.add(unit)
            for name, rule in RULES.items():
                if rule(driver, device):
                    units[name].add(unit)
    return {name: len(found & holding) for name, found in units.items()}


def test_the_overview_shows_the_raw_numbers(demo, wanted, api, viewer_client: Client) -> None:
    """The overview's free/total units per class are those counted from the raw objects, and
    its partitions the API's."""
    results = api.get(URL).json()["results"]
    response = viewer_client.get(reverse("overview"))
    shown = response.context["availability"]
    assert {e["deviceClass"]: e["physical"] for e in shown} == {
        name: entry["physical"] for name, entry in wanted.items()
    }
    assert [(e["deviceClass"], e["physical"], e["partitions"]) for e in shown] == [
        (e["deviceClass"], e["physical"], e["partitions"]) for e in results
    ]
    html = response.content.decode()
    for entry in results:
        units = entry["physical"]
        assert (
            f'data-class="{entry["deviceClass"]}" data-free="{units["free"]}" '
            f'data-total="{units["total"]}"'
        ) in html
        for partition in entry["partitions"]:
            assert (
                f'data-profile="{partition["profile"]}" data-free="{partition["free"]}" '
                f'data-total="{partition["total"]}"'
            ) in html


def test_the_node_page_shows_the_raw_numbers(demo, api, viewer_client: Client) -> None:
    """The node page lists, per class with units on the node, the numbers counted from the
    raw objects for that node, which are the API's ?node= numbers."""
    for node in sample_nodes(demo):
        results = api.get(URL, {"node": node}).json()["results"]
        local = [e for e in results if e["physical"]["total"]]
        raw = expected(demo, node=node)
        assert {e["deviceClass"]: e["physical"] for e in local} == {
            name: entry["physical"] for name, entry in raw.items() if entry["physical"]["total"]
        }
        response = viewer_client.get(reverse("node-detail", args=[node]))
        shown = response.context["availability"]
        assert [(e["deviceClass"], e["physical"]) for e in shown] == [
            (e["deviceClass"], e["physical"]) for e in local
        ]
        html = response.content.decode()
        for entry in local:
            units = entry["physical"]
            assert (
                f'data-class="{entry["deviceClass"]}" data-free="{units["free"]}" '
                f'data-total="{units["total"]}"'
            ) in html


def test_metrics_export_the_raw_numbers(demo, wanted, api) -> None:
    """dra_dashboard_class_units carries the units counted from the raw objects, and
    dra_dashboard_class_partitions the API's partitions."""
    results = api.get(URL).json()["results"]
    samples = as_samples(render_metrics().decode())
    assert {e["deviceClass"] for e in results} == set(wanted)
    for entry in results:
        for state in ("total", "free"):
            labels = (("device_class", entry["deviceClass"]), ("state", state))
            metric = samples[("dra_dashboard_class_units", labels)]
            assert (
                metric
                == entry["physical"][state]
                == wanted[entry["deviceClass"]]["physical"][state]
            )
            for partition in entry["partitions"]:
                labels = (
                    ("device_class", entry["deviceClass"]),
                    ("profile", partition["profile"]),
                    ("state", state),
                )
                assert samples[("dra_dashboard_class_partitions", labels)] == partition[state]


def test_class_devices_free_is_availability_free(demo, wanted, api) -> None:
    """dra_dashboard_class_devices{state="free"} counts what a new claim could get: blocked
    devices (partitions of a GPU whose counters are spent) are their own state, not free."""
    results = api.get(URL).json()["results"]
    samples = as_samples(render_metrics().decode())
    want = wanted
    blocked = 0.0
    for entry in results:
        name = entry["deviceClass"]

        def count(state: str, name: str = name) -> float:
            return samples[
                ("dra_dashboard_class_devices", (("device_class", name), ("state", state)))
            ]

        assert count("free") == entry["devices"]["free"] == want[name]["devices"]["free"]
        parts = ("allocated", "tainted", "blocked", "free")
        assert sum(count(state) for state in parts) == count("total")
        blocked += count("blocked")
    assert blocked > 0, "the demo has blocked partitions: the test must see some"


def test_the_devices_list_filters_by_class_membership(demo, wanted, viewer_client) -> None:
    """?class= on the devices page lists the class's devices as its selectors choose them
    (gpu-h100 is a model, mig-1g.10gb a profile: not a driver), as many as counted raw, and
    says what they amount to in the class's units."""
    for name in ("gpu-h100", "mig-1g.10gb", GPU_DRIVER):
        response = viewer_client.get(reverse("device-list"), {"class": name, "current": "true"})
        assert response.status_code == 200, name
        assert response.context["page_obj"].paginator.count == wanted[name]["devices"]["total"]
