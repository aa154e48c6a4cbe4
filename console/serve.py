"""The web server: uvicorn serving the ASGI application, its options kept in one place.

`python -m console.serve [--host H] [--port P] [APP]` is what `bin/run`, the image's `web`
process and the tests that start a real server run. Why uvicorn, and why these options:

- Request bodies stream. uvicorn hands the application each chunk as it arrives and stops
  reading the socket while 64 KiB wait unread, so `dashboard.security.BodySizeLimit` refuses a
  body over MAX_REQUEST_BYTES before anything buffers it: by its Content-Length without reading
  a byte, or, chunked, at the cap. Its 413 says `Connection: close`, and uvicorn closes the
  connection with the rest unread. (Daphne's Twisted received every body whole, into memory or
  a temporary file, and parsed form bodies on its event-loop thread before the application ran.)
- HTTP through h11 and the live socket through `websockets` (both pure Python or wheels,
  pinned); websocket messages are capped at WS_MAX_BYTES (the live socket is one-way).
- No proxy headers (`ProxyHeaders` takes them from DASHBOARD_TRUSTED_PROXIES only), no
  lifespan (the application has none), no Server header; logging is Django's (LOGGING), and
  the access log is the application's (`dashboard.access_log`: duration, user agent, no
  secrets from the query string), so uvicorn's is off.
- SIGTERM or SIGINT calls `dashboard.cancel.begin_shutdown()` before uvicorn's own handling, so
  running searches stop at once and the wait for open requests is short; a client that holds
  its connection open is cut after GRACEFUL_SECONDS.
- At start, a background thread computes the DeviceClass membership, the physical units and
  every pool's device counts (`claims.devices.counts.warm_counts`), which the overview,
  /metrics, pool-status and the availability API read: the first page after a start no longer
  pays for them, and the membership's CEL outcomes are read from the database where an earlier
  process stored them (`claims.devices.stored`: only devices of slices written since are
  evaluated); the leaks (/leaks/ and /metrics; `claims.leaks.warm_leaks`: those an earlier
  process stored at the same table versions, else read and stored); then the
  what-if state (`claims.whatif.service.warm_live_simulation`: the cluster read and every
  node's allocator pools), so the first question is not a cold one.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from types import FrameType
from typing import Any

import django
import uvicorn
from uvicorn.importer import import_from_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
# The apps are loaded before anything of theirs is imported (the warm-up below).
django.setup()

from django.db import connections  # noqa: E402

from claims.devices.counts import warm_counts  # noqa: E402
from claims.leaks import warm_leaks  # noqa: E402
from claims.whatif.service import warm_live_simulation  # noqa: E402
from dashboard.cancel import begin_shutdown  # noqa: E402
from dashboard.gcpause import gc_paused  # noqa: E402
from inventory.clusters import in_default_cluster  # noqa: E402

log = logging.getLogger(__name__)

DEFAULT_APP = "console.asgi:application"
WS_MAX_BYTES = 64 * 1024
GRACEFUL_SECONDS = 10


class Server(uvicorn.Server):
    """uvicorn's server, telling running searches to stop as soon as a signal asks it to exit."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        begin_shutdown()
        super().handle_exit(sig, frame)


def config(app: Any, *, host: str, port: int) -> uvicorn.Config:
    """The server's configuration for `app` (an ASGI callable or "module:attribute")."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http="h11",
        ws="websockets-sansio",
        ws_max_size=WS_MAX_BYTES,
        lifespan="off",
        proxy_headers=False,
        server_header=False,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m console.serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("DASHBOARD_PORT", "8000")))
    parser.add_argument("app", nargs="?", default=DEFAULT_APP, help="module:attribute")
    args = parser.parse_args(argv)
    # Import the application first: Django's logging is then in place for the server's lines,
    # and a broken application fails before the port is taken.
    application = import_from_string(args.app)
    threading.Thread(target=_warm, name="warm-units", daemon=True).start()
    Server(config(application, host=args.host, port=args.port)).run()


@in_default_cluster
def _warm() -> None:
    # One pause of the collector for the whole warm-up: each computation's own pause ended in a
    # full collection over what the one before had built (0.4-0.8 s at 5,000 nodes), and the
    # simulation's settle_heap freezes what all of them keep.
    with gc_paused():
        try:
            warm_counts()
            warm_leaks()
        except Exception:  # an empty or unmigrated database: the first page computes it instead
            log.warning("could not compute the device class membership at start", exc_info=True)
        try:
            warm_live_simulation()
        except Exception:  # a relist under way, an unmigrated database: the first question
            log.warning("could not build the what-if state at start", exc_info=True)
        finally:
            connections.close_all()


if __name__ == "__main__":
    main()
