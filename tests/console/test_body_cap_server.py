"""The real web server refuses 100 MB bodies without holding them: memory, not seconds, is measured.

The server is started as `bin/run` starts it (`python -m console.serve`). Each test streams a
100 MB anonymous body over a raw socket (generated piece by piece, never held whole), asks
/healthz on a second connection while the upload is under way, and reads the server process's
peak resident memory (VmHWM in /proc) against what it used before the upload.
"""

from __future__ import annotations

import http.client
import itertools
import select
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.hostile_server import server_command, start_server
from tests.paths import ROOT

pytestmark = pytest.mark.once

BODY_BYTES = 100 * 1024 * 1024
PIECE = 256 * 1024
# The server may grow by this much while it refuses a body 100 MB long (it held 1.2 GB).
MAX_GROWTH_BYTES = 150 * 1024 * 1024
# /healthz is asked on a second connection each time this much more of the body went out.
HEALTH_EVERY = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """(pid, port) of one server process over an empty database, no sync, the default cap."""
    var_dir = tmp_path_factory.mktemp("body-cap-var")
    process, port = start_server(var_dir, DATABASE_URL="sqlite:///:memory:", EMBEDDED_SYNC="0")
    try:
        yield process.pid, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def memory_kb(pid: int, field: str) -> int:
    """VmRSS (resident now) or VmHWM (peak resident) of the process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def healthz(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    finally:
        connection.close()


def multipart_pieces(boundary: str) -> tuple[bytes, Iterator[bytes], bytes]:
    """(head, filler pieces, tail) of one multipart/form-data file field of BODY_BYTES in all."""
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return head, filler(BODY_BYTES - len(head) - len(tail), b"x" * PIECE), tail


def filler(total: int, piece: bytes) -> Iterator[bytes]:
    """`total` bytes as repeats of `piece` (the same object each time: nothing accumulates)."""
    while total > 0:
        yield piece if total >= len(piece) else piece[:total]
        total -= len(piece)


def chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """HTTP/1.1 chunked transfer coding of `pieces`."""
    for piece in pieces:
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def upload(port: int, head: bytes, pieces: Iterator[bytes]) -> tuple[bytes, int, list[int]]:
    """Send `head` and then `pieces` until the server answers or stops reading.

    Returns what the server answered, the body bytes sent, and the /healthz statuses asked
    each HEALTH_EVERY bytes sent (while the server was being sent the body).
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sent = 0
    health: list[int] = []
    answer = b""
    try:
        sock.sendall(head)
        for piece in pieces:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
            if sent // HEALTH_EVERY > len(health):
                health.append(healthz(port))
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    finally:
        sock.close()
    return answer, sent, health


def request_head(port: int, *, content_type: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: {content_type}\r\n{framing}\r\n\r\n"
    ).encode()


def refused_without_growth(
    pid: int, port: int, head: bytes, pieces: Iterator[bytes]
) -> tuple[int, list[int]]:
    """Upload, check the 413 and the server's memory; (body bytes sent, /healthz statuses)."""
    assert healthz(port) == 200
    before = memory_kb(pid, "VmRSS")
    answer, sent, health = upload(port, head, pieces)
    peak = memory_kb(pid, "VmHWM")
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"connection: close" in answer.lower()
    assert all(status == 200 for status in health)
    assert healthz(port) == 200
    assert (peak - before) * 1024 <= MAX_GROWTH_BYTES, f"grew {(peak - before) // 1024} MiB"
    return sent, health


def test_bin_run_and_the_image_start_this_server() -> None:
    """The tests' server command is the one bin/run and the image's entrypoint run."""
    command = server_command(8000)
    assert command[1:6] == ["-m", "console.serve", "--host", "127.0.0.1", "--port"]
    run = (ROOT / "bin/run").read_text()
    assert '.venv/bin/python -m console.serve --host 127.0.0.1 --port "$port" &' in run
    assert "daphne" not in run
    entrypoint = (ROOT / "deploy/entrypoint.sh").read_text()
    assert 'exec python -m console.serve --host 0.0.0.0 --port "${DASHBOARD_PORT:-8000}"' in (
        entrypoint
    )
    assert "daphne" not in entrypoint


def test_a_declared_100_mb_multipart_body_is_refused_unread(server) -> None:
    """A Content-Length of 100 MB is answered 413 before the body is read."""
    pid, port = server
    boundary = "cap-test-boundary"
    head, pieces, tail = multipart_pieces(boundary)
    request = request_head(
        port, content_type=f"multipart/form-data; boundary={boundary}", length=BODY_BYTES
    )
    sent, _ = refused_without_growth(pid, port, request + head, itertools.chain(pieces, [tail]))
    assert sent < BODY_BYTES


def test_a_chunked_100_mb_urlencoded_body_is_cut_at_the_cap(server) -> None:
    """A chunked form body of `a=1&` repeated is read up to the cap, then answered 413."""
    pid, port = server
    form = b"a=1&" * (PIECE // 4)
    head = request_head(port, content_type="application/x-www-form-urlencoded", length=None)
    sent, health = refused_without_growth(pid, port, head, chunked(filler(BODY_BYTES, form)))
    assert sent < BODY_BYTES
    assert health, "/healthz was asked while the body was being read"


def test_a_chunked_100_mb_multipart_body_is_cut_at_the_cap(server) -> None:
    """A chunked multipart body (no length to refuse by) is cut at the cap too."""
    pid, port = server
    boundary = "cap-test-boundary"
    head, pieces, tail = multipart_pieces(boundary)
    request = request_head(
        port, content_type=f"multipart/form-data; boundary={boundary}", length=None
    )
    body = chunked(itertools.chain([head], pieces, [tail]))
    sent, health = refused_without_growth(pid, port, request, body)
    assert sent < BODY_BYTES
    assert health, "/healthz was asked while the body was being read"
