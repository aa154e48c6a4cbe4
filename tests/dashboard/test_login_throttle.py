"""Sign-in throttling: repeated failures lock one username from one address, and only that pair."""

from __future__ import annotations

import pytest
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.utils import timezone

from dashboard.models import SignInThrottle
from dashboard.throttle import is_locked, pair_key

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def limits(settings) -> None:
    """Small limits; the counters are rows, rolled back after each test."""
    settings.LOGIN_MAX_FAILURES = 3
    settings.LOGIN_MAX_ADDRESS_FAILURES = 10
    settings.LOGIN_LOCKOUT_SECONDS = 600


def sign_in(client: Client, password: str, *, address: str = "192.0.2.10", user: str = "viewer"):
    return client.post(
        LOGIN, {"username": user, "password": password, "next": "/"}, REMOTE_ADDR=address
    )


def test_lockout_after_repeated_failures_refuses_even_the_right_password(viewer_user) -> None:
    """After LOGIN_MAX_FAILURES wrong passwords the right one is refused with 429 for a while."""
    client = Client()
    for _ in range(3):
        assert sign_in(client, "wrong").status_code == 200
    assert is_locked("viewer", "192.0.2.10")
    response = sign_in(client, "viewer-password")
    assert response.status_code == 429
    assert b"Too many failed sign-ins" in response.content
    assert SESSION_KEY not in client.session


def test_lockout_is_per_username_and_address(viewer_user, admin_user) -> None:
    """The same user from another address, or another user from the same one, still signs in."""
    for _ in range(3):
        sign_in(Client(), "wrong")
    assert sign_in(Client(), "viewer-password", address="192.0.2.99").status_code == 302
    other = sign_in(Client(), "admin-password", user="admin")
    assert other.status_code == 302
    assert is_locked("VIEWER", "192.0.2.10")  # usernames are compared case-insensitively


def test_a_success_clears_the_failure_count(viewer_user) -> None:
    """Failures below the limit are forgotten after a successful sign-in."""
    for _ in range(2):
        sign_in(Client(), "wrong")
    assert sign_in(Client(), "viewer-password").status_code == 302
    for _ in range(2):
        sign_in(Client(), "wrong")
    assert not is_locked("viewer", "192.0.2.10")
    assert sign_in(Client(), "viewer-password").status_code == 302


def test_the_admin_login_is_throttled_too(admin_user) -> None:
    """The lock lives in the authentication backend, so the admin's sign-in form obeys it."""
    for _ in range(3):
        sign_in(Client(), "wrong", user="admin")
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "admin", "password": "admin-password", "next": "/admin/"},
        REMOTE_ADDR="192.0.2.10",
    )
    assert response.status_code == 200
    assert SESSION_KEY not in client.session


def test_the_lock_expires(viewer_user) -> None:
    """Once the lock's time has passed the right password works again."""
    for _ in range(3):
        sign_in(Client(), "wrong")
    assert sign_in(Client(), "viewer-password").status_code == 429
    # As if the lockout had passed.
    SignInThrottle.objects.filter(key=pair_key("viewer", "192.0.2.10")).update(
        locked_until=timezone.now()
    )
    assert sign_in(Client(), "viewer-password").status_code == 302
