"""Pages print for people: node selectors as `key in (a, b)`, attributes and capacity as
definition lists, readable pool status headers, leak ages as durations, names in natural order."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from claims.devices.pages import natural_key, node_selector_terms
from claims.pages import duration_text
from tests.factories import (
    allocation_result,
    claim_object,
    create,
    device_class_object,
    device_entry,
    node_object,
    slice_object,
)

DRIVER = "fabric.example.com"
ZONES = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
                {"key": "example.com/gpu", "operator": "Exists"},
            ]
        },
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
    ]
}


@pytest.mark.parametrize(
    ("selector", "terms"),
    [
        (
            ZONES,
            [
                "topology.kubernetes.io/zone in (a, b) and example.com/gpu exists",
                "metadata.name notin (n1)",
            ],
        ),
        (
            {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "k", "operator": "DoesNotExist"},
                            {"key": "cores", "operator": "Gt", "values": ["4"]},
                            {"key": "cores", "operator": "Lt", "values": ["64"]},
                        ]
                    }
                ]
            },
            ["k does not exist and cores > 4 and cores < 64"],
        ),
        ({"nodeSelectorTerms": [{}]}, ["(empty term: no node)"]),
        (None, []),
    ],
)
def test_node_selectors_read_as_text(selector, terms: list[str]) -> None:
    """Each term is one line of ANDed requirements; terms are alternatives."""
    assert node_selector_terms(selector) == terms


def _fabric(*names: str, selector=None) -> None:
    spec_devices = [
        device_entry(
            name,
            attributes={"speed": {"int": 400}, "rdma": {"bool": True}, "fw": {"version": "1.2.3"}},
            capacity={"bandwidth": "400G"},
        )
        for name in names
    ]
    fabric = slice_object("fabric", driver=DRIVER, pool="fabric", devices=spec_devices)
    if selector is not None:
        fabric["spec"].pop("allNodes")
        fabric["spec"]["nodeSelector"] = selector
    create(fabric)


def test_the_device_page_reads_like_a_page_not_a_dump(db, viewer_client: Client) -> None:
    """'Reachable from' is the selector as text; attributes and capacity are definition lists;
    no JSON block, and the slice's YAML is still there to copy or download."""
    _fabric("link-0", selector=ZONES)
    body = viewer_client.get(reverse("device-detail", args=[DRIVER, "fabric", "link-0"]))
    html = body.content.decode()
    assert "nodeSelectorTerms&#x27;" not in html and "{&#x27;" not in html
    assert (
        "nodes matching <code>topology.kubernetes.io/zone in (a, b) and example.com/gpu exists"
        "</code> or <code>metadata.name notin (n1)</code>"
    ) in html
    attributes = re.search(r'<dl class="props" id="device-attributes">(.*?)</dl>', html)[1]
    assert (
        '<dt class="mono">rdma</dt><dd><span class="mono">true</span> '
        '<span class="muted">bool</span></dd>'
    ) in attributes
    assert '<dt class="mono">fw</dt><dd><span class="mono">1.2.3</span>' in attributes
    capacity = re.search(r'<dl class="props" id="device-capacity">(.*?)</dl>', html)[1]
    assert '<dt class="mono">bandwidth</dt><dd><span class="mono">400G</span></dd>' in capacity
    assert "Published entry" not in html and '"attributes": {' not in html
    assert 'href="?download=yaml"' in html and "name: fabric" in body.context["raw_yaml"]


def test_pool_status_headers_are_words_with_their_api_field(db, viewer_client: Client) -> None:
    """Each header is spaced words with the API's field name beside it, not one run."""
    _fabric("link-0")
    html = viewer_client.get(reverse("pool-detail", args=[DRIVER, "fabric"])).content.decode()
    head = html.split('id="pool-status"')[1].split("</thead>")[0]
    assert '<th class="num" scope="col">Total devices <code class="field">totalDevices</code>' in (
        head
    )
    assert re.findall(r'<code class="field">(\w+)</code>', head) == [
        "totalDevices",
        "allocatedDevices",
        "availableDevices",
        "unavailableDevices",
        "resourceSliceCount",
    ]


def test_devices_are_in_natural_order_in_the_grid_and_the_lists(db, viewer_client) -> None:
    """link-2 comes before link-10 on the pool grid, the device list (default and by name,
    both ways) and a DeviceClass page."""
    names = ["link-10", "link-2", "link-0", "link-1", "link-11", "link-3"]
    _fabric(*names)
    natural = ["link-0", "link-1", "link-2", "link-3", "link-10", "link-11"]
    assert sorted(names, key=natural_key) == natural
    pool = viewer_client.get(reverse("pool-detail", args=[DRIVER, "fabric"]))
    assert [cell["device"].name for cell in pool.context["grid"]] == natural
    assert re.findall(r'data-device="([^"]+)"', pool.content.decode()) == natural
    for ordering, expected in (("", natural), ("name", natural), ("-name", natural[::-1])):
        listed = viewer_client.get(reverse("device-list"), {"ordering": ordering})
        assert [d.name for d, _ in listed.context["rows"]] == expected, ordering
    create(device_class_object("fabric", expression=f'device.driver == "{DRIVER}"'))
    page = viewer_client.get(reverse("device-class-detail", args=["fabric"]))
    assert [d.name for d, _ in page.context["rows"]] == natural


def test_natural_order_keeps_whole_devices_before_partitions() -> None:
    """Only the trailing number is compared as a number: gpu-2 before gpu-10, and the whole
    GPUs before the partitions named after them, the same in SQL as in Python."""
    names = ["gpu-10", "gpu-1-mig-1g-10gb-0", "gpu-2", "gpu-1", "gpu-1-mig-1g-10gb-10"]
    assert sorted(names, key=natural_key) == [
        "gpu-1",
        "gpu-2",
        "gpu-10",
        "gpu-1-mig-1g-10gb-0",
        "gpu-1-mig-1g-10gb-10",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (42.7, "42 s"),
        (60, "1 min"),
        (12 * 60 + 59, "12 min"),
        (3 * 3600, "3 h"),
        (3 * 3600 + 12 * 60 + 5, "3 h 12 min"),
        (86_400 + 3600 * 6, "1 d 6 h"),
        (4 * 86_400, "4 d"),
        (28_063_726, "324 d"),
        (-5, "0 s"),
    ],
)
def test_durations_read_in_units(seconds: float, text: str) -> None:
    """Two units at most, days alone from ten days on."""
    assert duration_text(seconds) == text


def test_the_leak_page_shows_ages_as_durations_with_the_time(db, viewer_client, settings):
    """The age is a duration in words, the exact start in `<time datetime>` and its title; no
    raw second counts."""
    settings.LEAK_UNRESERVED_SECONDS = 600
    claim = claim_object(
        "forgotten", results=[allocation_result("req", driver=DRIVER, pool="fabric", device="x")]
    )
    claim["status"]["allocation"]["allocationTimestamp"] = "2020-01-02T03:04:05Z"
    create(node_object("n"), claim)
    html = viewer_client.get(reverse("leak-list")).content.decode()
    assert "unreserved for over 10 min" in html
    row = html.split('data-kind="unreserved"')[1].split("</tr>")[0]
    assert '<time datetime="2020-01-02T03:04:05+00:00">2020-01-02 03:04:05 UTC</time>' in row
    age = re.search(
        r'<td class="age"><time datetime="2020-01-02T03:04:05\+00:00" '
        r'title="since 2020-01-02 03:04:05 UTC">(\d+) d</time></td>',
        row,
    )
    assert age, row
    assert not re.search(r"\d{5,} s", html)
