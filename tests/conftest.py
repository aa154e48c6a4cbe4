"""Shared fixtures: fixed personas for permission tests and API clients.

The session refuses to start when a system package the suite needs is missing, so a test never
fails half-way for want of what `bin/system-deps` installs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

SYSTEM_PACKAGES = {
    "redis-server": lambda: shutil.which("redis-server") is not None,
    "postgresql": lambda: any(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    "chromium": lambda: Path("/usr/bin/chromium").exists(),
    "chromium-driver": lambda: Path("/usr/bin/chromedriver").exists(),
}


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [name for name, present in SYSTEM_PACKAGES.items() if not present()]
    if missing:
        raise pytest.UsageError(
            f"system packages missing: {', '.join(missing)}; run bin/system-deps first "
            "(bin/test does)"
        )


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
