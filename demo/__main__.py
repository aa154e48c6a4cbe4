"""Run the demo cluster: `python -m demo --port 8001 --nodes 50 --seed 1`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from demo.server import load_demo
from dralib.kube.fakeapi.churn import ChurnLoop
from dralib.kube.fakeapi.resources import DRA_VERSIONS
from dralib.kube.fakeapi.server import FakeApiServer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        description="Serve a generated DRA demo cluster over the Kubernetes API on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8001, help="port (0: any free port)")
    parser.add_argument("--nodes", type=int, default=50, help="number of nodes to generate")
    parser.add_argument("--seed", type=int, default=1, help="seed of generator and churn")
    parser.add_argument(
        "--churn-interval", type=float, default=2.0, help="seconds between churn steps (0: none)"
    )
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig file here")
    parser.add_argument(
        "--served",
        default="v1",
        help=f"comma-separated resource.k8s.io versions to serve, of {','.join(DRA_VERSIONS)}; "
        "empty for a cluster without DRA",
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks"
    )
    parser.add_argument(
        "--history-limit", type=int, default=10_000, help="changes kept for watches"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    served = [v.strip() for v in args.served.split(",") if v.strip()]
    try:
        server = FakeApiServer(
            port=args.port,
            served_versions=served,
            bookmark_interval=args.bookmark_interval,
            history_limit=args.history_limit,
        )
    except ValueError as exc:
        print(f"fakeapi: {exc}", file=sys.stderr)
        return 2
    server.start()
    churn = load_demo(server, nodes=args.nodes, seed=args.seed)
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    loop = ChurnLoop(server, churn, interval=args.churn_interval) if args.churn_interval else None
    if loop is not None:
        loop.start()
    done = threading.Event()

    def _finish(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGINT, _finish)
    signal.signal(signal.SIGTERM, _finish)
    versions = ",".join(server.served_versions) or "none"
    counts = {p: len(server.objects(p)) for p in ("nodes", "resourceslices", "resourceclaims")}
    where = f", kubeconfig {args.kubeconfig}" if args.kubeconfig else ""
    print(
        f"fakeapi: serving {server.url} (resource.k8s.io: {versions}),"
        f" rv {server.resource_version}, {counts}{where}",
        flush=True,
    )
    done.wait()
    if loop is not None:
        loop.stop()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
