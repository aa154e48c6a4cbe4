"""Every list says who holds a busy device: the claim and the pods it is reserved for, as links,
in a fixed number of queries."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import (
    allocation_result,
    claim_object,
    create,
    device_entry,
    node_object,
    pod_object,
    slice_object,
)

DRIVER = "nic.example.com"
NODE = "node-a"


def held_cluster(*, devices: int, pods_per_claim: int = 1, stored_pods: int | None = None) -> None:
    """One node-local pool of `devices` devices, each held by its own claim `c-<i>` that is
    reserved for `pods_per_claim` pods `c-<i>-p<j>`; the first `stored_pods` of each are
    stored (all by default), the rest are gone."""
    stored = pods_per_claim if stored_pods is None else stored_pods
    objects = [
        node_object(NODE),
        slice_object(
            "links",
            driver=DRIVER,
            pool=NODE,
            node=NODE,
            devices=[device_entry(f"link-{i}") for i in range(devices)],
        ),
    ]
    for i in range(devices):
        pods = [f"c-{i}-p{j}" for j in range(pods_per_claim)]
        result = allocation_result("req", driver=DRIVER, pool=NODE, device=f"link-{i}")
        objects.append(claim_object(f"c-{i}", results=[result], node=NODE, reserved_for=pods))
        objects += [pod_object(pod, claim=f"c-{i}", node=NODE) for pod in pods[:stored]]
    create(*objects)


def _row(body: str, cell: str) -> str:
    """The table row of the page that contains `cell`."""
    return next(row for row in body.split("<tr>") if cell in row)


def test_the_device_list_says_which_claim_and_pods_hold_each_device(db, viewer_client) -> None:
    """A held device's row links its claim and the claim's pods."""
    held_cluster(devices=3, pods_per_claim=2)
    body = viewer_client.get(reverse("device-list")).content.decode()
    assert "<th>Held by</th>" in body
    row = _row(body, f'href="{reverse("device-detail", args=[DRIVER, NODE, "link-1"])}"')
    assert f'href="{reverse("claim-detail", args=["team-a", "c-1"])}"' in row
    for pod in ("c-1-p0", "c-1-p1"):
        assert f'<a href="{reverse("pod-detail", args=["team-a", pod])}">{pod}</a>' in row
    assert "c-2-p0" not in row


def test_the_claim_list_names_the_pods_not_a_count(db, viewer_client) -> None:
    """ "Reserved for" shows the pods as links, the first three, then "+N more"; a pod that is
    gone is named without a link."""
    held_cluster(devices=2, pods_per_claim=5, stored_pods=2)
    body = viewer_client.get(reverse("claim-list")).content.decode()
    assert "consumer" not in body
    row = _row(body, f'href="{reverse("claim-detail", args=["team-a", "c-0"])}"')
    for pod in ("c-0-p0", "c-0-p1"):
        assert f'<a href="{reverse("pod-detail", args=["team-a", pod])}">{pod}</a>' in row
    assert '<span class="mono">c-0-p2</span> <span class="muted">(pod gone)</span>' in row
    assert "c-0-p3" not in row and "+2 more" in row


def test_pool_tiles_write_the_holder_in_words(db, viewer_client) -> None:
    """Each tile shows its device and its holder (first pod) as text and in its accessible
    name; a free tile says free."""
    held_cluster(devices=2)
    create(slice_object("spare", driver=DRIVER, pool="spare", devices=[device_entry("x-0")]))
    body = viewer_client.get(reverse("pool-detail", args=[DRIVER, NODE])).content.decode()
    tile = re.search(r'<div class="dev allocated"[^>]*data-device="link-1".*?</div>', body)
    assert tile, body
    assert 'aria-label="link-1: allocated; claim team-a/c-1, reserved for c-1-p0"' in tile[0]
    pod_link = f'<a href="{reverse("pod-detail", args=["team-a", "c-1-p0"])}">c-1-p0</a>'
    assert f'<span class="dev-holder">{pod_link}</span>' in tile[0]
    spare = viewer_client.get(reverse("pool-detail", args=[DRIVER, "spare"])).content.decode()
    assert '<span class="dev-holder"><span class="muted">free</span></span>' in spare


def test_a_tile_whose_claim_is_reserved_for_nobody_names_the_claim(db, viewer_client) -> None:
    """Without a pod the tile names and links the claim."""
    create(
        node_object(NODE),
        slice_object("s", driver=DRIVER, pool=NODE, node=NODE, devices=[device_entry("link-0")]),
        claim_object(
            "lonely", results=[allocation_result("req", driver=DRIVER, pool=NODE, device="link-0")]
        ),
    )
    body = viewer_client.get(reverse("pool-detail", args=[DRIVER, NODE])).content.decode()
    claim_link = f'<a href="{reverse("claim-detail", args=["team-a", "lonely"])}">team-a/lonely</a>'
    assert f'<span class="dev-holder">{claim_link}</span>' in body
    devices = viewer_client.get(reverse("device-list")).content.decode()
    assert "(reserved for nobody)" in devices


def test_the_node_page_links_its_pods(db, viewer_client) -> None:
    """The node's pods are links to their pages."""
    held_cluster(devices=2)
    body = viewer_client.get(reverse("node-detail", args=[NODE])).content.decode()
    url = reverse("pod-detail", args=["team-a", "c-1-p0"])
    assert f'<a href="{url}">team-a/c-1-p0</a>' in body


# Measured: session and user, the page's own queries, one for the claims holding the page's
# devices and one for the pods they are reserved for (the claim list needs only the second).
# The node page adds the free units per class (claims.devices.availability): the membership
# fingerprint and the holds, and six more here because every load changes the slices
# (class membership: classes, slice versions, devices, the changed devices' attributes; the
# units: devices and their slices' partition type attribute), and the holds' fingerprint.
PAGES = [
    # Each page also reads the sync freshness for its header badge (two queries).
    ("device-list", [], 12),
    ("claim-list", [], 9),
    ("pool-detail", [DRIVER, NODE], 15),
    ("node-detail", [NODE], 21),
]


@pytest.mark.parametrize(("name", "args", "limit"), PAGES)
def test_holders_cost_no_query_per_row(
    db, viewer_client: Client, django_assert_max_num_queries, name: str, args: list, limit: int
) -> None:
    """With 40 held devices, each claim reserved for three pods, the page runs as many queries
    as with 2 devices, and at most a fixed number."""
    url = reverse(name, args=args)
    # The first page in a process reads the stored membership outcomes once: counted after it.
    held_cluster(devices=1, pods_per_claim=3)
    assert viewer_client.get(url).status_code == 200
    held_cluster(devices=2, pods_per_claim=3)
    with django_assert_max_num_queries(limit) as small:
        assert viewer_client.get(url).status_code == 200
    held_cluster(devices=40, pods_per_claim=3)
    with django_assert_max_num_queries(limit) as large:
        assert viewer_client.get(url).status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)
