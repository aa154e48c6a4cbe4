"""Fixtures for the console tests: demo clusters, signed-in clients, a private Redis server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from dashboard import timings
from inventory.sync import upsert_events
from tests.console.expected import JSON, load_objects
from tests.paths import free_port

# Kinds in the order a fresh sync would store them (claims name devices of slices).
LOAD_ORDER = ("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourceClaim")


@pytest.fixture
def demo_objects() -> list[JSON]:
    return load_objects()


@pytest.fixture
def demo_cluster(db, demo_objects: list[JSON]) -> list[JSON]:
    """The scenario objects stored through the sync write path, one batch per kind."""
    for kind in LOAD_ORDER:
        result = upsert_events(
            kind, [(o, None) for o in demo_objects if o["kind"] == kind], publish=False
        )
        assert not result.skipped, f"{kind}: {result.skipped}"
    return demo_objects


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A throwaway redis-server on a free port; fails (never skips) without redis-server."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (bin/services installs it)"
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(autouse=True)
def clean_whatif_histogram(settings) -> Iterator[None]:
    """Every test starts and ends with an empty in-process what-if histogram."""
    settings.REDIS_URL = ""
    timings.reset_whatif_histogram()
    yield
    timings._local.reset()
