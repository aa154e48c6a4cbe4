"""Churn for the fake API server: objects applied as a served version stores them, on a timer.

Anything with a `step()` that returns (event type, object) pairs can drive a `ChurnLoop`: the demo
cluster's churn model (`demo.churn.DemoChurn`) or a test's fixed script.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from dralib.kube.fakeapi.resources import DRA_GROUP, DRA_PLURALS_BY_VERSION, resource_type_of
from dralib.kube.fakeapi.server import FakeApiServer
from dralib.kube.fakeapi.store import Obj
from dralib.kube.normalize import to_version

Converter = Callable[[Obj], Obj | None]


class Churn(Protocol):
    """Anything whose `step()` returns (event type, object) pairs, like DemoChurn."""

    def step(self) -> list[tuple[str, Obj]]: ...


def convert_for_served(obj: Obj, served: tuple[str, ...]) -> Obj | None:
    """The object as a server serving `served` stores it, or None when it has no place there.

    Core objects pass through. resource.k8s.io objects stay as they are when their version is
    served; otherwise they are converted to the newest served version with
    `dralib.kube.normalize.to_version`. Kinds that version lacks, and every DRA object on a
    cluster without DRA, are left out.
    """
    rt = resource_type_of(obj)
    if rt.group != DRA_GROUP:
        return obj
    if not served:
        return None
    version = str(obj["apiVersion"]).rpartition("/")[2]
    if version in served and rt.plural in DRA_PLURALS_BY_VERSION[version]:
        return obj
    target = served[0]
    if rt.plural not in DRA_PLURALS_BY_VERSION[target]:
        return None
    converted: Obj = to_version(obj, f"{DRA_GROUP}/{target}")
    return converted


_reported: set[str] = set()


def apply_object(server: FakeApiServer, obj: Obj) -> bool:
    """Store `obj` as the server's served versions hold it; False when it has no place there."""
    try:
        stored = convert_for_served(obj, server.served_versions)
        if stored is None:
            return False
        server.apply(stored)
    except ValueError as exc:
        # One line per kind: a version that cannot hold a kind would otherwise flood stderr.
        kind = str(obj.get("kind")) if isinstance(obj, dict) else "?"
        if kind not in _reported:
            _reported.add(kind)
            print(f"fakeapi: skipping {_name(obj)} (and others like it): {exc}", file=sys.stderr)
        return False
    return True


def _name(obj: Any) -> str:
    if not isinstance(obj, dict):
        return repr(obj)[:60]
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    prefix = f"{namespace}/" if namespace else ""
    return f"{obj.get('kind', '?')} {prefix}{metadata.get('name', '?')}"


class ChurnLoop:
    """A background thread applying `churn.step()` to the server every `interval` seconds."""

    def __init__(self, server: FakeApiServer, churn: Churn, *, interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"churn interval must be positive, got {interval}")
        self.server = server
        self.churn = churn
        self.interval = interval
        self.steps = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        """Apply one churn step; returns how many changes reached the server."""
        applied = 0
        for event_type, obj in self.churn.step():
            if event_type == "DELETED":
                metadata = obj.get("metadata") or {}
                try:
                    self.server.delete(
                        obj["kind"], name=metadata["name"], namespace=metadata.get("namespace")
                    )
                    applied += 1
                except (KeyError, ValueError):
                    # Deleting what this server never stored (e.g. a kind it does not serve).
                    continue
            elif event_type in ("ADDED", "MODIFIED"):
                applied += int(apply_object(self.server, obj))
            else:
                print(f"fakeapi: unknown churn event type {event_type!r}", file=sys.stderr)
        self.steps += 1
        return applied

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fakeapi-churn", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - the demo must keep running
                print(f"fakeapi: churn step failed: {exc!r}", file=sys.stderr)
