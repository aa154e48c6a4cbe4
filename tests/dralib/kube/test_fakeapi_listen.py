"""The fake API server's listening socket queues connections as kube-apiserver's does."""

from __future__ import annotations

import contextlib
import socket

from dralib.kube.fakeapi import FakeApiServer
from dralib.kube.fakeapi.handler import FakeHttpServer


def test_many_connections_queue_while_the_server_accepts_none() -> None:
    """64 clients connecting at once all complete their handshake before any is accepted.

    Go's listener (kube-apiserver) has the kernel's somaxconn as its backlog; with
    socketserver's 5, the 7th SYN was dropped and its client waited for the 1 s retransmit.
    """
    httpd = FakeHttpServer(("127.0.0.1", 0), FakeApiServer())
    clients: list[socket.socket] = []
    try:
        for _ in range(64):
            client = socket.create_connection(httpd.server_address, timeout=5)
            clients.append(client)
        # Each is established: the kernel queued it for an accept that has not happened.
        assert all(client.getpeername() == httpd.server_address for client in clients)
        assert len(clients) == 64
    finally:
        for client in clients:
            with contextlib.suppress(OSError):
                client.close()
        httpd.server_close()
