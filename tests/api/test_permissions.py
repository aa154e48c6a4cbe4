"""Who may read the API: signed-in users (session or token), everyone with PUBLIC_READ."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.api.endpoints import ALL_ENDPOINTS

URLS = [e.url for e in ALL_ENDPOINTS] + [
    "/api/inventory/utilisation/pools/",
    "/api/inventory/utilisation/classes/",
    "/api/schema/",
    "/api/docs/",
]


@pytest.mark.parametrize("url", URLS)
def test_anonymous_is_refused(anon_api, stranger, url) -> None:
    """Without a user and without public read, every endpoint answers 401 or 403."""
    assert stranger is None
    assert anon_api.get(url).status_code in (401, 403)


@pytest.mark.parametrize("url", URLS)
def test_viewer_reads(api, url) -> None:
    """A member of the viewer group reads every endpoint."""
    assert api.get(url).status_code == 200


@pytest.mark.parametrize("url", URLS)
def test_admin_reads(admin_user, url) -> None:
    """An administrator reads every endpoint."""
    client = APIClient()
    client.force_authenticate(admin_user)
    assert client.get(url).status_code == 200


def test_any_signed_in_user_reads(db) -> None:
    """The viewer role is any active signed-in user: group membership is not required."""
    plain = User.objects.create_user("plain", password="plain-password")
    client = APIClient()
    client.force_authenticate(plain)
    assert client.get("/api/inventory/devices/").status_code == 200


def test_inactive_user_is_refused(db) -> None:
    """A deactivated account no longer reads, even with a live authenticated request."""
    inactive = User.objects.create_user("gone", password="gone-password", is_active=False)
    client = APIClient()
    client.force_authenticate(inactive)
    assert client.get("/api/inventory/devices/").status_code == 403


def test_session_login_reads(viewer_user) -> None:
    """A browser session (Django login) authenticates API reads."""
    client = APIClient()
    assert client.login(username="viewer", password="viewer-password")
    assert client.get("/api/inventory/devices/").status_code == 200


def test_token_reads(token_api) -> None:
    """A REST framework token authenticates API reads."""
    assert token_api.get("/api/claims/resource-claims/").status_code == 200


def test_wrong_token_is_refused(db) -> None:
    """A token that does not exist is refused (403: session auth comes first in settings)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")
    response = client.get("/api/inventory/devices/")
    assert response.status_code in (401, 403)
    assert "token" in response.json()["detail"].lower()


@pytest.mark.parametrize("url", URLS)
def test_public_read_opens_reads(anon_api, settings, url) -> None:
    """DASHBOARD_PUBLIC_READ lets anonymous visitors read every endpoint."""
    settings.PUBLIC_READ = True
    assert anon_api.get(url).status_code == 200


def test_public_read_does_not_open_writes(anon_api, settings, cluster) -> None:
    """Public read is read only: an anonymous write is still refused."""
    settings.PUBLIC_READ = True
    assert anon_api.post("/api/inventory/devices/", {}).status_code in (401, 403, 405)
    assert anon_api.delete("/api/inventory/devices/1/").status_code in (401, 403, 405)
