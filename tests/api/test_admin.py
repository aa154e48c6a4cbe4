"""The admin shows synced objects read-only."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

from claims.models import ResourceClaim
from inventory.models import Device

ADMIN_PAGES = [
    "node",
    "deviceclass",
    "resourceclass",
    "pool",
    "resourceslice",
    "device",
    "counterset",
    "devicetaintrule",
    "syncstate",
    "skippedobject",
]
CLAIM_PAGES = [
    "resourceclaim",
    "resourceclaimtemplate",
    "allocateddevice",
    "pod",
    "resourcequota",
    "podschedulingcontext",
]


@pytest.fixture
def admin_client_(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize(
    "path", [f"inventory/{m}" for m in ADMIN_PAGES] + [f"claims/{m}" for m in CLAIM_PAGES]
)
def test_admin_changelists_render(admin_client_, cluster, path: str) -> None:
    """Every synced kind has an admin list that renders for a superuser."""
    assert admin_client_.get(f"/admin/{path}/").status_code == 200


def test_admin_is_read_only(admin_client_, admin_user, cluster) -> None:
    """Even a superuser may view but not add, change or delete synced objects."""
    model_admin = admin.site._registry[Device]
    request = type("Request", (), {"user": admin_user})()
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    claim = ResourceClaim.objects.get(name="train-0")
    page = admin_client_.get(f"/admin/claims/resourceclaim/{claim.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert admin_client_.get("/admin/inventory/device/add/").status_code == 403
