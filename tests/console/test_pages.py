"""Every page renders from the demo cluster and needs sign-in; the console's own pages (overview,
sync status, what-if, login, 404) show what they should and scale."""

from __future__ import annotations

import re

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from claims.choices import ClaimState
from claims.devices.classes import class_utilisation
from claims.devices.counts import driver_utilisation
from claims.models import ResourceClaim
from console.overview import CHART_COLOURS
from inventory.models import Device, Node, Pool
from tests.console.demo import load_demo
from tests.paths import ROOT

LIST_PAGES = ["overview", "pool-list", "node-list", "claim-list", "template-list", "quota-list"]


def detail_urls() -> list[str]:
    """One detail URL of each kind, picked from what the demo put in the database."""
    pool = Pool.objects.filter(counter_sets__isnull=False).first() or Pool.objects.first()
    device = Device.objects.first()
    node = Node.objects.first()
    claim = ResourceClaim.objects.filter(state=ClaimState.RESERVED).first()
    assert pool and device and node and claim
    return [
        reverse("pool-detail", args=[pool.driver, pool.name]),
        reverse("device-detail", args=[device.driver, device.pool_name, device.name]),
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


def test_unknown_pages_get_a_styled_404_with_navigation(db, viewer_client: Client, settings):
    """A missing page answers 404 with the site's layout and its navigation."""
    settings.DEBUG = False
    response = viewer_client.get("/no-such-page/")
    assert response.status_code == 404
    content = response.content.decode()
    assert "Page not found" in content and f'href="{reverse("claim-list")}"' in content


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_overview_runs_a_fixed_number_of_queries(db, viewer_user) -> None:
    """The overview makes as many queries for 20 nodes as for 5: no query per row."""
    client = Client()
    client.force_login(viewer_user)
    load_demo(nodes=5, seed=3)
    # The first page in a process may read the stored membership outcomes, pool counts and
    # leaks (claims.KeptMembership) once each; whether it does depends on which tests ran
    # before here.
    first = _queries(client, reverse("overview"))
    small_again = _queries(client, reverse("overview"))
    load_demo(nodes=5, seed=5)
    small = _queries(client, reverse("overview"))
    assert small <= first <= small + 3
    load_demo(nodes=20, seed=4)
    assert Node.objects.count() >= 20
    large = _queries(client, reverse("overview"))
    # Table versions do not say how many rows a write changed: after many pods changed,
    # written_since reads up to its limit before the reports are read whole (one query more).
    assert small <= large <= small + 1
    # The exact class counts add a fingerprint query and a holds/taints query, and four more
    # (classes, the slices' versions, devices, the changed devices' attributes) when class
    # membership is brought up to date, as after each demo load here; the units read their
    # slices' partition type attribute too.
    # One query more than before for the pods that report device health (KEP-4680).
    # Free units per class (claims.devices.availability) share the membership and holds read
    # for the class counts, and read the units (devices, counter sets) after slices changed, as
    # here. The sync freshness reads two more (the snapshot import and the sync states), and
    # two again where the sync never ran, to say whether the data is an imported snapshot.
    # Every pool's device counts are kept (claims.devices.counts) under the membership's,
    # the claims', the taint rules' and the pods' fingerprint: one query more to read it, and
    # the unhealthy devices' holders and taints when counted again; and the pools each claim
    # holds, so that a later claim change counts only those pools again. And the reports'
    # written_since query above.
    assert large <= 34
    # Nothing changed: the membership, units, holds and counts are read from memory, only
    # their fingerprints and the page's own small lists are asked.
    again = _queries(client, reverse("overview"))
    assert again == small_again <= 15


def test_public_readers_get_no_live_socket(demo, client: Client, viewer_client: Client, settings):
    """Anonymous public readers get no live topics (the socket would refuse them)."""
    settings.PUBLIC_READ = True
    assert client.get(reverse("overview")).context["live_topics"] == []
    assert viewer_client.get(reverse("overview")).context["live_topics"] == ["overview"]


def test_overview_class_counts_match_the_service(demo, viewer_client: Client) -> None:
    """The overview's per-class counts equal claims.devices.classes.class_utilisation()."""
    shown = viewer_client.get(reverse("overview")).context["classes"]["classes"]
    expected = class_utilisation()["classes"]
    assert [(c["name"], c["driver"], c["devices"]) for c in shown] == [
        (c["name"], c["driver"], c["devices"]) for c in expected
    ]


def test_overview_free_excludes_tainted_and_blocked(demo, viewer_client: Client) -> None:
    """Free, allocated and unavailable are disjoint parts of the device total."""
    response = viewer_client.get(reverse("overview"))
    totals = response.context["totals"]
    counts = driver_utilisation()
    total = sum(c["total"] for c in counts.values())
    tainted = sum(c["tainted"] for c in counts.values())
    blocked = sum(c["blocked"] for c in counts.values())
    allocated = sum(c["allocated"] for c in counts.values())
    assert totals["available"] == total - allocated - tainted - blocked
    assert totals["available"] + totals["allocated"] + totals["unavailable"] == totals["total"]
    content = response.content.decode()
    free_card = content[content.index(">Free<") : content.index(">Unavailable<")]
    assert not re.search(r"\d+ (tainted|blocked)", free_card)


def test_chart_colours_differ_from_device_state_colours(db) -> None:
    """No driver line uses a colour that means a device state."""
    css = (ROOT / "static" / "dashboard" / "app.css").read_text().lower()
    states = ("allocated", "shared", "free", "admin", "tainted", "unhealthy", "blocked")
    state_colours = {
        line.split(":")[1].strip().rstrip(";")
        for line in css.splitlines()
        if any(line.strip().startswith(f"--{s}:") for s in states)
    }
    assert state_colours and not state_colours & {c.lower() for c in CHART_COLOURS}
