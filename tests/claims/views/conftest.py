"""Fixtures for the claims pages: a demo cluster and a signed-in viewer."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.console.demo import load_demo


@pytest.fixture
def demo(db) -> dict[str, list[dict[str, Any]]]:
    """A 10-node demo cluster (seed 1) in the database."""
    return load_demo(nodes=10, seed=1)


@pytest.fixture
def viewer_client(viewer_user) -> Client:
    """A browser session signed in as the viewer persona."""
    client = Client()
    client.force_login(viewer_user)
    return client
