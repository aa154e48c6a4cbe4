"""A partitioned pool's grid groups its devices under their counter set (one GPU each), one
summary (one tab stop) per group; pools without counter sets stay one flat grid."""

from __future__ import annotations

import re
from collections import defaultdict

from django.test import Client
from django.urls import reverse

from demo.catalog import GPU_DRIVER


def _partitioned_pool(demo) -> tuple[str, dict[str, list[str]]]:
    """The first demo GPU pool with counter sets, and its devices per counter set (raw; the
    counter sets may sit in a slice of their own)."""
    slices = [s["spec"] for s in demo["ResourceSlice"] if s["spec"]["driver"] == GPU_DRIVER]
    pool = min(s["pool"]["name"] for s in slices if s.get("sharedCounters"))
    groups: dict[str, list[str]] = defaultdict(list)
    for spec in slices:
        if spec["pool"]["name"] != pool:
            continue
        for device in spec.get("devices") or []:
            sets = sorted({c["counterSet"] for c in device.get("consumesCounters") or []})
            groups[sets[0] if sets else ""].append(device["name"])
    return pool, dict(groups)


def test_partitions_are_grouped_under_their_counter_set(demo, viewer_client: Client) -> None:
    """Every counter set is one closed <details> holding exactly the devices that consume it."""
    pool, raw = _partitioned_pool(demo)
    response = viewer_client.get(reverse("pool-detail", args=[GPU_DRIVER, pool]))
    groups = response.context["groups"]
    shown = {g["name"]: sorted(c["device"].name for c in g["cells"]) for g in groups}
    assert shown == {name: sorted(devices) for name, devices in raw.items()}
    assert len([name for name in shown if name]) > 1
    html = response.content.decode()
    opened = re.findall(r'<details class="devgroup" data-counter-set="([^"]+)"( open)?>', html)
    assert sorted(name for name, _ in opened) == sorted(name for name in raw if name)
    assert not any(is_open for _, is_open in opened), "closed until the reader opens one"
    assert html.count("<summary>") >= len(opened)
    # Each summary says what its GPU's devices are doing.
    for group in groups:
        if group["name"]:
            assert sum(n for _, n in group["states"]) == len(group["cells"])


def test_a_pool_without_counter_sets_stays_flat(demo, viewer_client: Client) -> None:
    """No counter set, no groups: the grid is the flat list of tiles."""
    pools = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"])
        for s in demo["ResourceSlice"]
        if not s["spec"].get("sharedCounters")
        and not any(d.get("consumesCounters") for d in s["spec"].get("devices") or [])
    }
    driver, pool = sorted(pools)[0]
    response = viewer_client.get(reverse("pool-detail", args=[driver, pool]))
    assert response.context["groups"] == []
    assert 'class="devgroup"' not in response.content.decode()


def test_what_if_opens_the_group_of_a_chosen_partition(demo, viewer_client: Client) -> None:
    """A what-if that picks a MIG partition shows its GPU's group open, the others closed."""
    claim = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mig, namespace: team-a}
spec:
  devices:
    requests:
    - name: mig
      exactly: {deviceClassName: mig-1g.10gb}
"""
    response = viewer_client.post(reverse("what-if"), {"yaml": claim})
    grids = response.context["result"]["grids"]
    assert grids, response.context["result"]["reasons"]
    groups = [g for grid in grids for g in grid["groups"] if g["name"]]
    assert [g["chosen"] for g in groups].count(True) == 1
    html = response.content.decode()
    assert len(re.findall(r'<details class="devgroup" data-counter-set="[^"]+" open>', html)) == 1
