"""`manage.py run_sync`: keep the database in sync with the cluster, all kinds, one process.

The embedded mode (no Celery worker): one watcher thread per kind until SIGTERM or SIGINT; each
stops after its current batch. With Redis configured the per-kind locks are shared, so this
process and Celery workers never watch the same kind at once.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dralib.kube.kinds import KINDS
from inventory.sync.watch import start_watchers


class Command(BaseCommand):
    help = "Watch the cluster (settings KUBECONFIG/KUBE_CONTEXT/KUBE_IN_CLUSTER) until stopped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kinds",
            default="",
            help=f"comma-separated kinds to watch (default: all of {', '.join(KINDS)})",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=0.0,
            help="stop after this many seconds (default: run until SIGTERM/SIGINT)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        kinds = [k.strip() for k in str(options["kinds"]).split(",") if k.strip()] or list(KINDS)
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise CommandError(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
        duration = float(options["duration"])
        if duration < 0:
            raise CommandError(f"--duration must be >= 0, got {duration}")
        stop = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {
            sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self._run(kinds, stop=stop, duration=duration)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run(self, kinds: list[str], *, stop: threading.Event, duration: float) -> None:
        threads = start_watchers(kinds, stop=stop)
        self.stdout.write(f"run_sync: watching {', '.join(kinds)}")
        deadline = time.monotonic() + duration if duration else None
        while not stop.wait(0.5):
            if deadline is not None and time.monotonic() >= deadline:
                stop.set()
        for thread in threads:
            thread.join(timeout=30)
        self.stdout.write("run_sync: stopped")
