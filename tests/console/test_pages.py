"""Every page renders from the demo cluster, needs sign-in, keeps its filters, and scales."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from claims.choices import ClaimState
from claims.devices.states import annotate_device_state, refine_device_states
from claims.models import AllocatedDevice, ResourceClaim, ResourceQuota
from inventory.models import Device, Node, Pool
from tests.console.demo import load_demo

LIST_PAGES = ["overview", "pool-list", "node-list", "claim-list", "template-list", "quota-list"]


def detail_urls() -> list[str]:
    """One detail URL of each kind, picked from what the demo put in the database."""
    pool = Pool.objects.filter(counter_sets__isnull=False).first() or Pool.objects.first()
    device = Device.objects.first()
    node = Node.objects.first()
    claim = ResourceClaim.objects.filter(state=ClaimState.RESERVED).first()
    assert pool and device and node and claim
    return [
        reverse("pool-detail", args=[pool.pk]),
        reverse("device-detail", args=[device.pk]),
        reverse("node-detail", args=[node.name]),
        reverse("claim-detail", args=[claim.namespace, claim.name]),
    ]


def test_every_page_renders_for_a_signed_in_viewer(demo, viewer_client: Client) -> None:
    """Each list, detail and tool page answers 200 with the demo cluster loaded."""
    urls = [reverse(name) for name in [*LIST_PAGES, "sync-status", "what-if"]] + detail_urls()
    for url in urls:
        response = viewer_client.get(url)
        assert response.status_code == 200, url
        assert b"DRA Dashboard" in response.content


def test_anonymous_visitors_are_sent_to_sign_in(demo, client: Client) -> None:
    """Without PUBLIC_READ an anonymous request is redirected to the login page."""
    for url in [reverse(name) for name in LIST_PAGES] + detail_urls():
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next=")


def test_public_read_opens_pages_but_not_what_if_runs(demo, client: Client, settings) -> None:
    """PUBLIC_READ lets anonymous users read pages; running a what-if still needs sign-in."""
    settings.PUBLIC_READ = True
    for url in [reverse(name) for name in LIST_PAGES]:
        assert client.get(url).status_code == 200, url
    response = client.post(reverse("what-if"), {"yaml": "kind: ResourceClaim"})
    assert response.status_code == 302


def test_login_page_signs_in(db, client: Client, viewer_user) -> None:
    """The login template posts credentials and lands on the overview."""
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post(
        "/accounts/login/", {"username": "viewer", "password": "viewer-password", "next": "/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"


def test_fragments_render_through_the_page_view(demo, viewer_client: Client) -> None:
    """`?fragment=` returns just the fragment, with the same filters applied."""
    response = viewer_client.get(reverse("claim-list"), {"state": "pending", "fragment": "table"})
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="claim-table"')
    assert "<html" not in body
    assert "fragment=table" in body and "state=pending" in body
    assert viewer_client.get(reverse("claim-list"), {"fragment": "nope"}).status_code == 404


def test_claim_filters_come_from_the_url(demo, viewer_client: Client) -> None:
    """Filtering by state lists exactly the claims in that state, by name."""
    response = viewer_client.get(reverse("claim-list"), {"state": "pending"})
    shown = {claim.pk for claim in response.context["page_obj"].object_list}
    expected = set(
        ResourceClaim.objects.filter(state="pending")
        .order_by("namespace", "name")
        .values_list("pk", flat=True)[:50]
    )
    assert shown == expected and shown


def test_bad_filter_values_are_reported_not_crashed(demo, viewer_client: Client) -> None:
    """A wrong parameter value shows an error naming the parameter and lists nothing."""
    response = viewer_client.get(reverse("pool-list"), {"complete": "maybe"})
    assert response.status_code == 200
    assert response.context["errors"] and response.context["errors"][0].startswith("complete:")
    assert not response.context["page_obj"].object_list


def test_pool_grid_shows_each_device_state(demo, viewer_client: Client) -> None:
    """The pool page colours each current device by the state the services compute."""
    held = AllocatedDevice.objects.values_list("driver", "pool").first()
    pool = Pool.objects.get(driver=held[0], name=held[1])
    response = viewer_client.get(reverse("pool-detail", args=[pool.pk]))
    states = {cell["device"].name: cell["state"] for cell in response.context["grid"]}
    devices = list(annotate_device_state(pool.devices.filter(current=True)))
    refine_device_states(devices)  # blocked and unhealthy need quantity arithmetic in Python
    expected = {device.name: device.effective_state for device in devices}
    assert states == expected
    assert "allocated" in states.values() or "shared" in states.values()
    for name, state in expected.items():
        assert f'data-device="{name}" data-state="{state}"' in response.content.decode()


def test_node_list_counts_reachable_and_free_devices(demo, viewer_client: Client) -> None:
    """Free device counts per node match the device states of the node's local devices plus
    the devices reachable from every node."""
    response = viewer_client.get(reverse("node-list"))
    devices = annotate_device_state(Device.objects.filter(current=True))
    for node, counts, _claims in response.context["rows"]:
        local = devices.filter(node_name=node.name)
        assert counts["local"] == local.count()
        assert counts["reachable"] >= counts["local"]
        local_free = local.filter(state__in=("free", "admin")).count()
        assert counts["free"] >= local_free
        assert counts["free"] <= counts["reachable"]


def test_quota_page_shows_device_class_lines(demo, viewer_client: Client) -> None:
    """Every device-class quota key of the demo quotas appears with used and hard values."""
    response = viewer_client.get(reverse("quota-list"))
    lines = [line for _quota, rows, _others in response.context["rows"] for line in rows]
    assert lines
    for line in lines:
        assert line["key"].endswith(".deviceclass.resource.k8s.io/devices")
        assert 0 <= line["percent"] <= 100


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("name", LIST_PAGES)
def test_list_pages_run_a_fixed_number_of_queries(db, viewer_user, name: str) -> None:
    """A list page makes as many queries for 20 nodes as for 5: no query per row."""
    client = Client()
    client.force_login(viewer_user)
    load_demo(nodes=5, seed=3)
    small = _queries(client, reverse(name))
    load_demo(nodes=20, seed=4)
    assert Node.objects.count() >= 20
    large = _queries(client, reverse(name))
    assert large == small
    # The overview's exact class counts add a fingerprint query and a holds/taints query, and two
    # more (classes, devices) when class membership is recomputed, as after each demo load here.
    # One query more than before for the pods that report device health (KEP-4680).
    assert large <= (20 if name == "overview" else 16)


def test_node_list_filters_by_label(demo, viewer_client: Client) -> None:
    """`?label=key=value` keeps exactly the nodes carrying that label value."""
    from demo.catalog import ZONE_LABEL

    zone = Node.objects.first().labels[ZONE_LABEL]
    response = viewer_client.get(reverse("node-list"), {"label": f"{ZONE_LABEL}={zone}"})
    shown = {node.name for node, _counts, _claims in response.context["rows"]}
    expected = {n.name for n in Node.objects.all() if n.labels.get(ZONE_LABEL) == zone}
    assert shown == expected and shown


def test_public_readers_get_no_live_socket(demo, client: Client, viewer_client: Client, settings):
    """Anonymous public readers get no live topics (the socket would refuse them)."""
    settings.PUBLIC_READ = True
    assert client.get(reverse("overview")).context["live_topics"] == []
    assert viewer_client.get(reverse("overview")).context["live_topics"] == ["overview"]


def test_overview_class_counts_match_the_service(demo, viewer_client: Client) -> None:
    """The overview's per-class counts equal claims.devices.classes.class_utilisation()."""
    from claims.devices.classes import class_utilisation

    shown = viewer_client.get(reverse("overview")).context["classes"]["classes"]
    expected = class_utilisation()["classes"]
    assert [(c["name"], c["driver"], c["devices"]) for c in shown] == [
        (c["name"], c["driver"], c["devices"]) for c in expected
    ]


def test_pool_page_query_count_does_not_grow_with_its_devices(demo, viewer_client: Client) -> None:
    """Every pool page (2 to dozens of devices, shareable or partitioned) stays within one
    fixed number of queries: queries are skipped when a pool has nothing shareable or
    partitioned, never added per device."""
    pools = list(Pool.objects.order_by("device_count"))
    assert pools[0].device_count < pools[-1].device_count
    assert any(
        p.devices.filter(allow_multiple_allocations=True).exclude(capacity={}).exists()
        for p in pools
    )
    counts = {p.pk: _queries(viewer_client, reverse("pool-detail", args=[p.pk])) for p in pools}
    # 14 and 14 with the query for pods reporting device health (KEP-4680).
    assert max(counts.values()) <= 14
    assert counts[pools[-1].pk] <= 14


QUOTA_KEY = "gpu.deviceclass.resource.k8s.io/devices"


def _quota(used: str, hard: str) -> ResourceQuota:
    return ResourceQuota(
        uid=f"uid-{used}-{hard}",
        namespace="team-q",
        name="devices",
        obj={},
        raw={},
        hard={QUOTA_KEY: hard, "pods": "10"},
        used={QUOTA_KEY: used},
    )


@pytest.mark.parametrize(
    ("used", "hard", "percent", "full"),
    [
        ("1k", "2k", 50.0, False),
        ("500m", "1", 50.0, False),
        ("2", "2000m", 100.0, True),
        ("3", "1k", 0.3, False),
        ("1500", "1k", 100.0, True),
    ],
)
def test_quota_lines_compare_quantities_exactly(
    used: str, hard: str, percent: float, full: bool
) -> None:
    """Suffixed quantities (1k, 500m) are compared by value, not read as 0."""
    from claims.pages import quota_rows

    [line] = quota_rows(_quota(used, hard))
    assert (line["device_class"], line["used"], line["hard"]) == ("gpu", used, hard)
    assert line["percent"] == percent
    assert line["full"] is full
    assert line["unparseable"] == ""


def test_quota_lines_show_unparseable_values_as_such(db, viewer_client: Client) -> None:
    """A used or hard value that is not a quantity is named on the page, with no bar."""
    from claims.pages import quota_rows

    [line] = quota_rows(_quota("lots", "4"))
    assert line["unparseable"] == "used 'lots' is not a quantity"
    assert line["percent"] == 0.0 and line["full"] is False
    quota = _quota("2", "many")
    [line] = quota_rows(quota)
    assert line["unparseable"] == "hard 'many' is not a quantity"
    quota.save()
    page = viewer_client.get(reverse("quota-list")).content.decode()
    assert "2 / many" in page
    assert "unparseable: hard &#x27;many&#x27; is not a quantity" in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    ["/claims/?class='", "/templates/?class='", "/claims/?class=%25s", "/pools/?complete=100%25"],
)
def test_bad_filter_values_show_an_error_not_a_500(viewer_client, url) -> None:
    """A filter value the FilterSet refuses (quotes, percent signs) is a form error on the page."""
    response = viewer_client.get(url)
    assert response.status_code == 200
    assert b"filter-error" in response.content
