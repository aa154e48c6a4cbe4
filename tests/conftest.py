"""Shared fixtures: fixed personas for permission tests and API clients."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient


@pytest.fixture
def admin_user(db) -> User:
    """A superuser: sees everything."""
    return User.objects.create_superuser("admin", "admin@example.com", "admin-password")


@pytest.fixture
def viewer_user(db) -> User:
    """A signed-in member of the read-only viewer group."""
    user = User.objects.create_user("viewer", "viewer@example.com", "viewer-password")
    group, _ = Group.objects.get_or_create(name="viewer")
    user.groups.add(group)
    return user


@pytest.fixture
def stranger(db) -> None:
    """An anonymous visitor."""
    return None


@pytest.fixture
def api(viewer_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer_user)
    return client


@pytest.fixture
def anon_api(db) -> APIClient:
    return APIClient()
