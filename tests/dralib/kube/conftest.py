"""Fixtures for the fake API server's tests: the server on loopback and the official client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from dralib.kube.fakeapi import FakeApiServer


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    """A running fake API server with frequent bookmarks (a module may define its own)."""
    with FakeApiServer(bookmark_interval=0.2) as fake:
        yield fake


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> Iterator[client.ApiClient]:
    """The official client, configured from a kubeconfig pointing at `server`."""
    path = server.write_kubeconfig(tmp_path / "kubeconfig.yaml")
    api_client = config.new_client_from_config(config_file=str(path))
    yield api_client
    api_client.close()
