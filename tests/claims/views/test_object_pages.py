"""The pages for devices, classes, taint rules, classic objects, pods, quotas and search."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from claims.devices.classes import class_membership
from claims.models import Pod, ResourceQuota
from inventory.models import Device, DeviceClass, Node
from tests.console.demo import load_demo

OBJECT_LISTS = [
    "device-list",
    "device-class-list",
    "taint-rule-list",
    "resource-class-list",
    "scheduling-context-list",
    "pod-list",
]


def test_object_pages_render_and_are_in_the_nav(demo, viewer_client: Client) -> None:
    """Each list page answers 200 and every page's nav links to it."""
    overview = viewer_client.get(reverse("overview")).content.decode()
    for name in OBJECT_LISTS:
        url = reverse(name)
        assert viewer_client.get(url).status_code == 200, url
        assert f'href="{url}"' in overview, name


def test_a_device_class_page_lists_the_devices_it_selects(demo, viewer_client: Client) -> None:
    """The class page lists exactly the devices its CEL selectors select."""
    device_class = DeviceClass.objects.order_by("name").first()
    members = class_membership().members[device_class.name]
    response = viewer_client.get(reverse("device-class-detail", args=[device_class.name]))
    assert response.context["page_obj"].paginator.count == len(members)
    assert {d.pk for d, _holders in response.context["rows"]} <= set(members)


def test_pod_pages_link_claims(demo, viewer_client: Client) -> None:
    """A pod page lists its claim entries and links the claims that exist."""
    pod = Pod.objects.exclude(claim_statuses=[]).first() or Pod.objects.first()
    response = viewer_client.get(reverse("pod-detail", args=[pod.namespace, pod.name]))
    assert response.status_code == 200
    assert len(response.context["entries"]) == len(pod.resource_claims)


def test_search_finds_objects_of_several_kinds(demo, viewer_client: Client) -> None:
    """The header search lists matching objects per kind."""
    device = Device.objects.first()
    response = viewer_client.get(reverse("search"), {"q": device.name})
    kinds = [label for label, found, more in response.context["results"]]
    assert "Devices" in kinds
    url = reverse("device-detail", args=[device.driver, device.pool_name, device.name])
    assert url in response.content.decode()


@pytest.mark.parametrize("name", OBJECT_LISTS)
def test_object_list_pages_run_a_fixed_number_of_queries(db, viewer_user, name: str) -> None:
    """The query count of a list page does not grow with the cluster."""
    client = Client()
    client.force_login(viewer_user)
    # The first page in a process may read the stored membership outcomes once, depending
    # on which tests ran before: counted from the second cluster on.
    load_demo(nodes=5, seed=1)
    assert client.get(reverse("overview")).status_code == 200
    load_demo(nodes=12, seed=2)
    with CaptureQueriesContext(connection) as small:
        assert client.get(reverse(name)).status_code == 200
    load_demo(nodes=20, seed=4)
    with CaptureQueriesContext(connection) as large:
        assert client.get(reverse(name)).status_code == 200
    # Not equal: the device list reads the pools' counters only when its page shows a free
    # device that consumes counters, which the demo's seeds decide.
    assert len(large) <= len(small), name


def test_quotas_show_cpu_memory_and_pods_lines(db, viewer_client: Client) -> None:
    """Quota lines other than device classes are listed with used against hard."""
    ResourceQuota.objects.create(
        uid="q-1",
        namespace="team-z",
        name="compute",
        api_version="v1",
        raw={},
        obj={},
        hard={
            "cpu": "10",
            "memory": "64Gi",
            "pods": "20",
            "gpu.deviceclass.resource.k8s.io/devices": "4",
        },
        used={"cpu": "2500m", "memory": "32Gi", "pods": "20"},
    )
    response = viewer_client.get(reverse("quota-list"))
    [(quota, devices, others)] = response.context["rows"]
    assert [line["device_class"] for line in devices] == ["gpu"]
    by_resource = {line["resource"]: line for line in others}
    assert set(by_resource) == {"cpu", "memory", "pods"}
    assert by_resource["cpu"]["percent"] == 25.0 and by_resource["memory"]["percent"] == 50.0
    assert by_resource["pods"]["full"] is True
    assert "2500m" in response.content.decode()


def test_node_and_device_pages_offer_yaml(demo, viewer_client: Client) -> None:
    """Node pages show the Node's YAML; device pages the YAML of the slice that publishes it."""
    node = Node.objects.first()
    node_page = viewer_client.get(reverse("node-detail", args=[node.name]))
    assert f"name: {node.name}" in node_page.context["raw_yaml"]
    device = Device.objects.select_related("slice").first()
    url = reverse("device-detail", args=[device.driver, device.pool_name, device.name])
    download = viewer_client.get(url, {"download": "yaml"})
    assert f"name: {device.slice.name}" in download.content.decode()


@pytest.mark.parametrize("name", OBJECT_LISTS)
def test_object_list_tables_refresh_as_fragments(demo, viewer_client: Client, name: str) -> None:
    """The live layer can re-fetch each list's table through the page view."""
    response = viewer_client.get(reverse(name), {"fragment": "table"})
    assert response.status_code == 200
    assert b"<html" not in response.content and b'hx-trigger="live"' in response.content
