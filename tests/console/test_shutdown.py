"""A real daphne process: a search stops when its client leaves, and SIGTERM ends the server fast.

The server runs `console.asgi:application` over a cluster where the hostile what-if of
`tests.claims.whatif.test_budget` would search for many minutes, with a budget of 600 s: only
cancellation can end it in time. Whether the search runs is read from the process's CPU time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claims.whatif.test_budget import exponential_claim
from tests.console.hostile_server import prepare, start_daphne

BUDGET = "600"
# A search keeps one core busy (a loaded machine may give it less); an idle daphne uses next to
# nothing.
BUSY = 0.25
IDLE = 0.1
EXIT_WITHIN = 5.0


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    var_dir = tmp_path_factory.mktemp("shutdown-var")
    return var_dir, prepare(var_dir)


@pytest.fixture
def server(prepared) -> Iterator[tuple[subprocess.Popen[bytes], int, str]]:
    var_dir, token = prepared
    process, port = start_daphne(var_dir, WHATIF_BUDGET_SECONDS=BUDGET)
    try:
        yield process, port, token
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process, all threads, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_used(pid: int, seconds: float) -> float:
    """CPU seconds the process uses in the next `seconds` of wall time."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


def start_search(port: int, token: str) -> socket.socket:
    """POST the hostile what-if over a raw connection and leave the answer unread."""
    body = json.dumps({"yaml": exponential_claim()}).encode()
    head = (
        f"POST /api/claims/what-if/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Token {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(head + body)
    return client


def test_a_search_stops_when_its_client_goes_away(server) -> None:
    """The client hangs up mid-search: within a second the server's CPU falls to idle."""
    process, port, token = server
    client = start_search(port, token)
    time.sleep(0.5)
    assert cpu_used(process.pid, 1.0) > BUSY  # the search runs
    client.close()
    time.sleep(1.0)
    assert cpu_used(process.pid, 1.0) < IDLE
    assert process.poll() is None


def test_sigterm_stops_the_server_within_seconds_during_a_search(server) -> None:
    """SIGTERM while a search runs: the process exits within EXIT_WITHIN seconds."""
    process, port, token = server
    client = start_search(port, token)
    try:
        time.sleep(0.5)
        assert cpu_used(process.pid, 1.0) > BUSY
        stopped = time.monotonic()
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=EXIT_WITHIN + 10)
        took = time.monotonic() - stopped
    finally:
        client.close()
    assert process.poll() is not None and took < EXIT_WITHIN
