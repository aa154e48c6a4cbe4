"""A sync worker in its own process, for tests that kill it (`-m tests.inventory.sync.worker`).

Runs one watcher thread per kind (run_kind: the per-kind lock, then the watch loop) against the
kubeconfig's API server, writing to DASHBOARD_DATABASE_URL and taking its locks in
DASHBOARD_REDIS_URL, until it is killed or receives SIGTERM. `--migrate` only creates the
database and exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from dashboard import scope


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=False)
    parser.add_argument("--kinds", default="Node,ResourceClaim")
    parser.add_argument("--identity", default="worker")
    parser.add_argument("--lock-ttl", type=float, default=3.0)
    parser.add_argument("--migrate", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    if args.migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        return

    from dralib.kube.client import load_client
    from inventory.sync.watch import run_kind
    from tests.inventory.sync.conftest import FAST

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [
        threading.Thread(
            target=scope.carried(run_kind),
            kwargs={
                "kind": kind,
                "stop": stop,
                "options": FAST,
                "client_factory": lambda: load_client(kubeconfig=args.kubeconfig),
                "identity": f"{args.identity}:{kind}",
                "lock_retry": 0.1,
                "lock_ttl": args.lock_ttl,
            },
            daemon=True,
        )
        for kind in args.kinds.split(",")
    ]
    for thread in threads:
        thread.start()
    print("started", flush=True)
    stop.wait()
    for thread in threads:
        thread.join(timeout=10)


if __name__ == "__main__":
    main()
