"""Detail pages live at Kubernetes names: they survive churn, old id links redirect, and a name
that matches nothing is a 404 that names it."""

from __future__ import annotations

import copy
import re
import uuid

import pytest
from django.test import Client
from django.urls import resolve, reverse

from claims.models import AllocatedDevice, ResourceClaim
from inventory.models import Device, DeviceClass, Node, Pool, ResourceSlice
from inventory.sync import apply_events
from tests.factories import create, device_entry, slice_object

DRIVER = "gpu.example.com"
# A pool name is DNS subdomains joined by `/`: dots and slashes both occur.
POOL = "rack-1.example.com/row-2/node-3"
ID_LINK = re.compile(r'href="/(?:pools|devices)/\d+/')


@pytest.mark.parametrize(
    ("name", "args", "path"),
    [
        ("pool-detail", [DRIVER, "node-a"], "/pools/gpu.example.com/node-a/"),
        ("pool-detail", [DRIVER, POOL], f"/pools/{DRIVER}/{POOL}/"),
        ("device-detail", [DRIVER, "node-a", "gpu-0"], "/devices/gpu.example.com/node-a/gpu-0/"),
        ("device-detail", [DRIVER, POOL, "link-10"], f"/devices/{DRIVER}/{POOL}/link-10/"),
        ("node-detail", ["ip-10-0-0-1.ec2.internal"], "/nodes/ip-10-0-0-1.ec2.internal/"),
        ("claim-detail", ["team-a", "train.v2"], "/claims/team-a/train.v2/"),
        ("template-detail", ["team-a", "gpu.one"], "/templates/team-a/gpu.one/"),
        ("pod-detail", ["team-a", "web-0"], "/pods/team-a/web-0/"),
        ("device-class-detail", ["gpu.example.com"], "/device-classes/gpu.example.com/"),
    ],
)
def test_names_round_trip_through_the_url(name: str, args: list[str], path: str) -> None:
    """Every detail URL is built from names, and resolving it gives the same names back; a pool
    takes every segment after the driver, a device page's last segment is the device."""
    assert reverse(name, args=args) == path
    match = resolve(path)
    assert match.url_name == name and list(match.kwargs.values()) == args


def test_old_id_links_redirect_to_the_name(demo, viewer_client: Client) -> None:
    """`/pools/<id>/` and `/devices/<id>/` answer 301 to the name URL, query kept."""
    pool = Pool.objects.order_by("pk").first()
    device = Device.objects.order_by("pk").first()
    response = viewer_client.get(f"/pools/{pool.pk}/")
    assert response.status_code == 301
    assert response["Location"] == reverse("pool-detail", args=[pool.driver, pool.name])
    response = viewer_client.get(f"/devices/{device.pk}/", {"download": "yaml"})
    assert response.status_code == 301
    name_url = reverse("device-detail", args=[device.driver, device.pool_name, device.name])
    assert response["Location"] == f"{name_url}?download=yaml"
    assert viewer_client.get(response["Location"]).status_code == 200


def test_old_id_links_need_sign_in_and_a_gone_id_is_404(demo, client: Client, viewer_client):
    """An anonymous visitor is sent to sign in before learning any name; an id whose row is
    gone has nothing to redirect to."""
    pool = Pool.objects.order_by("pk").first()
    assert client.get(f"/pools/{pool.pk}/")["Location"].startswith("/accounts/login/")
    missing = Pool.objects.order_by("-pk").first().pk + 1000
    assert viewer_client.get(f"/pools/{missing}/").status_code == 404
    assert viewer_client.get(f"/devices/{missing * 100}/").status_code == 404


def test_no_page_links_to_a_database_id(demo, viewer_client: Client) -> None:
    """Lists, details, the overview and search link pools and devices by name only."""
    pool = Pool.objects.filter(node_name__gt="", device_count__gt=0).first()
    device = Device.objects.filter(pool=pool).first()
    claim = ResourceClaim.objects.filter(allocated_count__gt=0).first()
    pages = [
        reverse("overview"),
        reverse("pool-list"),
        reverse("device-list"),
        reverse("node-detail", args=[pool.node_name]),
        reverse("pool-detail", args=[pool.driver, pool.name]),
        reverse("device-detail", args=[device.driver, device.pool_name, device.name]),
        reverse("claim-detail", args=[claim.namespace, claim.name]),
        reverse("device-class-detail", args=[DeviceClass.objects.first().name]),
        reverse("search") + f"?q={device.name}",
    ]
    for url in pages:
        body = viewer_client.get(url).content.decode()
        assert not ID_LINK.search(body), (url, ID_LINK.search(body))
    pool_page = viewer_client.get(pages[4]).content.decode()
    assert reverse("device-detail", args=[device.driver, device.pool_name, device.name]) in (
        pool_page
    )
    # The fragment the live layer re-fetches is the name URL too.
    assert f'hx-get="{pages[4]}?fragment=body"' in pool_page


def test_names_with_dots_and_slashes_open_their_pages(db, viewer_client: Client) -> None:
    """A pool named with dots and slashes, and its devices, open at their name URLs."""
    create(
        slice_object(
            "fabric-slice",
            driver=DRIVER,
            pool=POOL,
            devices=[device_entry(f"link-{i}") for i in (0, 1, 2, 10)],
        )
    )
    pool_url = reverse("pool-detail", args=[DRIVER, POOL])
    page = viewer_client.get(pool_url)
    assert page.status_code == 200 and page.context["pool"].name == POOL
    device_url = reverse("device-detail", args=[DRIVER, POOL, "link-10"])
    assert f'href="{device_url}"' in page.content.decode()
    device_page = viewer_client.get(device_url)
    assert device_page.status_code == 200
    assert device_page.context["device"].key == f"{DRIVER}/{POOL}/link-10"
    assert f'href="{pool_url}"' in device_page.content.decode()


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (f"/pools/{DRIVER}/no-such-pool/", f"{DRIVER}/no-such-pool"),
        (f"/devices/{DRIVER}/{POOL}/gpu-9/", f"{DRIVER}/{POOL}/gpu-9"),
        ("/nodes/node-gone/", "node-gone"),
        ("/claims/team-a/claim-gone/", "team-a/claim-gone"),
        ("/templates/team-a/template-gone/", "team-a/template-gone"),
        ("/pods/team-a/pod-gone/", "team-a/pod-gone"),
        ("/device-classes/class-gone/", "class-gone"),
    ],
)
def test_a_name_that_matches_nothing_is_a_404_naming_it(
    db, viewer_client: Client, url: str, named: str
) -> None:
    """The 404 says which object is not in the cluster and links its list; live refreshes
    (`?fragment=`) get the 404 too, which marks an open page deleted."""
    response = viewer_client.get(url)
    assert response.status_code == 404
    assert response.templates[0].name == "claims/missing.html"
    assert response.context["name"] == named
    body = response.content.decode()
    assert f'<span class="mono">{named}</span> is not in the cluster' in body
    assert f'href="{response.context["listing"]}"' in body
    assert viewer_client.get(url, {"fragment": "body"}).status_code == 404


def test_a_missing_device_of_an_existing_pool_links_the_pool(db, viewer_client: Client) -> None:
    """The device 404 offers the pool when the pool is still there."""
    create(slice_object("s", driver=DRIVER, pool=POOL, devices=[device_entry("link-0")]))
    response = viewer_client.get(reverse("device-detail", args=[DRIVER, POOL, "link-7"]))
    assert response.status_code == 404
    assert f'href="{reverse("pool-detail", args=[DRIVER, POOL])}"' in response.content.decode()


def _replaced(raw: dict, *, rename: bool = False) -> dict:
    """The same object as a new incarnation: new uid (and slice name), as after a node swap."""
    fresh = copy.deepcopy(raw)
    meta = fresh["metadata"]
    meta["uid"] = str(uuid.uuid4())
    meta["resourceVersion"] = f"{meta.get('resourceVersion') or '1'}7"
    if rename:
        meta["name"] = f"{meta['name']}-r{uuid.uuid4().hex[:5]}"
    return fresh


def test_a_pool_url_survives_its_node_being_replaced(demo, viewer_client: Client) -> None:
    """A node is replaced under churn: its Node and slices are deleted through the sync, then
    re-created with new uids and new slice names. The pool's row id changes; the pool URL
    taken before still opens the same driver/pool, and so does a device URL."""
    held = AllocatedDevice.objects.values_list("driver", "pool").first()
    pool = Pool.objects.get(driver=held[0], name=held[1], node_name__gt="")
    old_id, driver, name = pool.pk, pool.driver, pool.name
    device = Device.objects.filter(pool=pool, current=True).order_by("name").first()
    pool_url = reverse("pool-detail", args=[driver, name])
    device_url = reverse("device-detail", args=[driver, name, device.name])
    assert viewer_client.get(pool_url).status_code == 200
    assert viewer_client.get(f"/pools/{old_id}/")["Location"] == pool_url
    node = Node.objects.get(name=pool.node_name).raw
    slices = [s.raw for s in ResourceSlice.objects.filter(pool=pool)]

    apply_events("ResourceSlice", [("DELETED", raw) for raw in slices], publish=False)
    apply_events("Node", [("DELETED", node)], publish=False)
    assert not Pool.objects.filter(driver=driver, name=name).exists()
    gone = viewer_client.get(pool_url)
    assert gone.status_code == 404 and gone.context["name"] == f"{driver}/{name}"
    assert viewer_client.get(f"/pools/{old_id}/").status_code == 404

    apply_events("Node", [("ADDED", _replaced(node))], publish=False)
    apply_events(
        "ResourceSlice", [("ADDED", _replaced(raw, rename=True)) for raw in slices], publish=False
    )
    replaced = Pool.objects.get(driver=driver, name=name)
    assert replaced.pk != old_id
    page = viewer_client.get(pool_url)
    assert page.status_code == 200
    assert (page.context["pool"].pk, page.context["pool"].driver, page.context["pool"].name) == (
        replaced.pk,
        driver,
        name,
    )
    # The page follows the pool by name: the replaced row's events reach it.
    assert page.context["live_topics"] == [f"pool:{driver}/{name}"]
    device_page = viewer_client.get(device_url)
    assert device_page.status_code == 200
    assert device_page.context["device"].pool_id == replaced.pk
    # The claim that held a device of the pool still links it by name.
    claim = AllocatedDevice.objects.filter(driver=driver, pool=name).first().claim
    claim_page = viewer_client.get(reverse("claim-detail", args=[claim.namespace, claim.name]))
    assert pool_url.replace("/pools/", "/devices/") in claim_page.content.decode()


def test_a_stale_generation_does_not_hide_the_current_device(db, viewer_client: Client) -> None:
    """Two rows may carry one device name (an old generation's slice lingers): the name URL
    shows the current one."""
    create(
        slice_object(
            "old", driver=DRIVER, pool="p", node="n", generation=1, devices=[device_entry("d")]
        ),
        slice_object(
            "new", driver=DRIVER, pool="p", node="n", generation=2, devices=[device_entry("d")]
        ),
    )
    assert Device.objects.filter(driver=DRIVER, pool_name="p", name="d").count() == 2
    response = viewer_client.get(reverse("device-detail", args=[DRIVER, "p", "d"]))
    assert response.status_code == 200
    assert response.context["device"].current and response.context["device"].slice.name == "new"
