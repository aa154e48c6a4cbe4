"""Nodes and pools filtered and sorted by the free physical units of a DeviceClass, with the
numbers of GET /api/inventory/availability/."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from inventory.models import Pool
from tests.claims.devices.kept import fresh  # noqa: F401 (autouse: nothing kept across tests)

URL = "/api/inventory/availability/"


def free_units(api, device_class: str, **scope: str) -> dict[str, int]:
    body = api.get(URL, {"class": device_class, **scope}).json()
    return body["results"][0]["physical"]


def test_nodes_with_at_least_n_free_units_of_a_class_sorted_by_free(
    demo, api, viewer_client: Client
) -> None:
    """`?class=gpu-h100&free_min=n&ordering=-free` lists exactly the nodes with n or more free
    H100 units, most free first, each with the API's numbers."""
    nodes = sorted({s["spec"].get("nodeName") for s in demo["ResourceSlice"]} - {None})
    per_node = {node: free_units(api, "gpu-h100", node=node) for node in nodes}
    least = max(units["free"] for units in per_node.values())
    assert least > 0
    response = viewer_client.get(
        reverse("node-list"), {"class": "gpu-h100", "free_min": least - 1, "ordering": "-free"}
    )
    assert response.context["errors"] == []
    shown = [
        (node.name, node.units_free, node.units_total) for node, *_ in response.context["rows"]
    ]
    assert shown, "some node has free H100 units"
    assert {name for name, *_ in shown} == {
        node for node, units in per_node.items() if units["free"] >= least - 1
    }
    assert [free for _, free, _ in shown] == sorted((free for _, free, _ in shown), reverse=True)
    for name, free, total in shown:
        assert per_node[name] == {"total": total, "free": free}
    assert f'data-free="{shown[0][1]}" data-total="{shown[0][2]}"' in response.content.decode()


def test_the_node_list_shows_free_units_per_class(demo, api, viewer_client: Client) -> None:
    """Without a class, each node lists its local free/total units per class, as the API."""
    response = viewer_client.get(reverse("node-list"))
    html = response.content.decode()
    for node, *_ in response.context["rows"][:4]:
        for name, units in node.class_units:
            assert units == free_units(api, name, node=node.name)
            assert f'data-class="{name}" data-free="{units["free"]}"' in html


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"ordering": "-free"}, "ordering"),
        ({"free_min": "2"}, "free_min"),
        ({"class": "no-such-class"}, "class"),
        ({"class": "gpu-h100", "free_min": "-1"}, "free_min"),
    ],
)
def test_node_free_needs_a_known_class(demo, viewer_client: Client, query, parameter) -> None:
    """Free units of which class? Without one (or with an unknown one) the page says so."""
    response = viewer_client.get(reverse("node-list"), query)
    assert response.status_code == 200
    errors = response.context["errors"]
    assert errors and errors[0].startswith(f"{parameter}:"), errors
    assert not response.context["rows"]


def test_pools_sort_by_free_units_not_devices(demo, api, viewer_client: Client) -> None:
    """Sorting pools by Free counts units: a MIG pool's 64 devices are 8 units, and the order
    and numbers are the API's per pool."""
    response = viewer_client.get(reverse("pool-list"), {"ordering": "-free"})
    rows = [pool for pool, _ in response.context["rows"]]
    assert [p.units_free for p in rows] == sorted((p.units_free for p in rows), reverse=True)
    for pool in rows[:6]:
        body = api.get(URL, {"pool": f"{pool.driver}/{pool.name}"}).json()["results"]
        assert pool.units_total >= max(e["physical"]["total"] for e in body)
    mig = next(p for p in rows if p.devices_total == 64)
    assert mig.units_total == 8


def test_pools_with_a_free_unit_of_a_class(demo, api, viewer_client: Client) -> None:
    """`?class=mig-1g.10gb&free_min=1` lists the MIG pools with a free GPU, with its numbers."""
    response = viewer_client.get(reverse("pool-list"), {"class": "mig-1g.10gb", "free_min": 1})
    rows = [pool for pool, _ in response.context["rows"]]
    assert rows
    for pool in rows:
        units = free_units(api, "mig-1g.10gb", pool=f"{pool.driver}/{pool.name}")
        assert units == {"total": pool.units_total, "free": pool.units_free}
        assert units["free"] >= 1
    expected = {
        pool.name
        for pool in Pool.objects.filter(device_count=64)
        if free_units(api, "mig-1g.10gb", pool=f"{pool.driver}/{pool.name}")["free"] >= 1
    }
    assert {pool.name for pool in rows} == expected


def test_filtered_devices_are_counted_in_units(demo, api, viewer_client: Client) -> None:
    """`/devices/?attribute=model=h100` lists whole H100s and their MIG slices; the page says
    they are the gpu-h100 class's units, with its numbers, and counts the slices apart."""
    response = viewer_client.get(reverse("device-list"), {"attribute": "model=h100"})
    units = response.context["units"]
    h100 = api.get(URL, {"class": "gpu-h100"}).json()["results"][0]
    mig = api.get(URL, {"class": "mig-1g.10gb"}).json()["results"][0]
    assert units["physical"] == h100["physical"]
    assert units["devices"]["total"] == response.context["page_obj"].paginator.count
    assert units["devices"]["total"] == h100["devices"]["total"] + mig["devices"]["total"]
    assert units["partitions"] == mig["partitions"]
    free, total = h100["physical"]["free"], h100["physical"]["total"]
    assert f'id="device-units" data-free="{free}" data-total="{total}"' in (
        response.content.decode()
    )
    assert viewer_client.get(reverse("device-list")).context.get("units") is None
