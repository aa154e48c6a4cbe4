"""A real server process: a search stops when its client leaves, and SIGTERM ends the server fast.

The server runs `console.asgi:application` over a cluster where the hostile what-if of
`tests.claims.whatif.test_budget` would search for many minutes, with a budget of 600 s: only
cancellation can end it in time. Whether the search runs is read from the process's CPU time
(clock ticks it was given, not wall time); why it stopped, from the server's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.claims.whatif.test_budget import exponential_claim
from tests.console.hostile_server import prepare, start_server

BUDGET = "600"
# CPU seconds a running search has certainly burned; an idle server uses next to nothing.
SEARCHED = 0.5
IDLE = 0.1
# Generous waits for what must happen: each is a small part of the budget the search would use.
WAIT = 60.0


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    var_dir = tmp_path_factory.mktemp("shutdown-var")
    return var_dir, prepare(var_dir)


@pytest.fixture
def server(prepared) -> Iterator[tuple[subprocess.Popen[bytes], int, str, Path]]:
    var_dir, token = prepared
    process, port = start_server(var_dir, WHATIF_BUDGET_SECONDS=BUDGET)
    try:
        yield process, port, token, var_dir / f"server-{port}.log"
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


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll `check` until it holds; fail after WAIT seconds (a wait, not a measurement)."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def wait_for_search(pid: int, before: float) -> None:
    """Wait until the process has spent SEARCHED CPU seconds since `before`: the search runs."""
    wait_until(lambda: cpu_seconds(pid) - before >= SEARCHED, "the search never ran")


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
    """The client hangs up mid-search: the search is cancelled and the server's CPU falls idle."""
    process, port, token, log = server
    before = cpu_seconds(process.pid)
    client = start_search(port, token)
    wait_for_search(process.pid, before)
    client.close()
    wait_until(
        lambda: "search cancelled: the client went away" in log.read_text(),
        "the search was never cancelled",
    )
    assert cpu_used(process.pid, 1.0) < IDLE
    assert process.poll() is None


def test_sigterm_stops_the_server_during_a_search(server) -> None:
    """SIGTERM while a search runs: the search is cancelled and the process exits."""
    process, port, token, log = server
    before = cpu_seconds(process.pid)
    client = start_search(port, token)
    try:
        wait_for_search(process.pid, before)
        process.send_signal(signal.SIGTERM)
        # Without the cancellation the server would wait for the search's 600 s budget.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=WAIT)
    finally:
        client.close()
    assert process.poll() is not None, "the server did not exit"
    assert "search cancelled: the server is shutting down" in log.read_text()
