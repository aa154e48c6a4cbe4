"""FakeApiServer: the fake Kubernetes API server run in a background thread, and its test API.

Tests and the demo mutate the cluster through Python (`apply`, `delete`, `compact`, `backup` and
`restore`), shape the server (`set_served_versions`, `inject_fault`, `stop`/`start` on the same
port) and point any client at it through `url` or a kubeconfig from `write_kubeconfig`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from dralib.kube.documents import dump_yaml
from dralib.kube.fakeapi.authz import RbacTable
from dralib.kube.fakeapi.faults import Fault, FaultKind, FaultPlan, Verb
from dralib.kube.fakeapi.handler import FakeHttpServer
from dralib.kube.fakeapi.resources import validate_versions
from dralib.kube.fakeapi.store import Backup, Obj, ObjectStore


@dataclass(frozen=True)
class RequestRecord:
    """One request the server received: method, path and query parameters."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)


class FakeApiServer:
    """A fake kube-apiserver on 127.0.0.1 speaking the real JSON wire format over HTTP/1.1.

    Use as a context manager (`with FakeApiServer() as server:`) or call `start()`/`stop()`;
    after the first start the port stays fixed, so a stopped server refuses connections on
    it and a restarted one answers there again.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        served_versions: Iterable[str] = ("v1",),
        history_limit: int = 10_000,
        bookmark_interval: float = 5.0,
        max_watch_seconds: float = 1800.0,
        token: str | None = None,
        list_items_with_type_meta: bool = False,
        cluster_uid: str | None = None,
        first_revision: int = 1000,
        watch_list: bool = True,
        too_large_wait: float = 3.0,
        continue_expired_token: bool = True,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"host must be a loopback address, got {host!r}")
        if bookmark_interval <= 0:
            raise ValueError(f"bookmark_interval must be positive, got {bookmark_interval}")
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self.token = token
        self.list_items_with_type_meta = list_items_with_type_meta
        # WatchList (sendInitialEvents on watches); off answers 422 as servers without it do.
        self.watch_list = watch_list
        # How long a list or watch list from a future resourceVersion waits before its 504
        # (the cacher's blockTimeout is 3 s).
        self.too_large_wait = too_large_wait
        # A 410 for an expired continue token carries a token to go on inconsistently, as etcd3
        # storage sends; off: the plain 410 older servers sent.
        self.continue_expired_token = continue_expired_token
        self._served = validate_versions(served_versions)
        self._store = ObjectStore(history_limit=history_limit, first_revision=first_revision)
        # Every cluster has a kube-system namespace; its uid names the cluster (a new cluster
        # at the same address has another one).
        self.cluster_uid = cluster_uid or str(uuid.uuid4())
        self._store.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "kube-system", "uid": self.cluster_uid},
            }
        )
        # RBAC objects SubjectAccessReviews are answered from (`load_rbac`); empty: none allowed.
        self.rbac = RbacTable()
        self._faults = FaultPlan()
        self._stopping = threading.Event()
        self._lock = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._active_watches = 0
        self._requests: deque[RequestRecord] = deque(maxlen=2000)
        self._httpd: FakeHttpServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> None:
        """Listen (on the same port as before, if started before) and serve in a thread."""
        if self._httpd is not None:
            return
        self._stopping.clear()
        self._httpd = FakeHttpServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fakeapi:{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and drop every open connection, as a crashed API server would."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        self._store.wake_all()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def served_versions(self) -> tuple[str, ...]:
        """The resource.k8s.io versions served, newest first; empty means no DRA."""
        return self._served

    def set_served_versions(self, versions: Iterable[str]) -> None:
        """Change the resource.k8s.io versions served (empty: a cluster without DRA)."""
        self._served = validate_versions(versions)

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out, as the opaque string clients see."""
        return str(self._store.revision)

    def apply(self, obj: Obj) -> Obj:
        """Create or update an object (emits ADDED or MODIFIED); returns the stored copy."""
        return self._store.apply(obj)

    def delete(self, kind_or_plural: str, *, name: str, namespace: str | None = None) -> Obj:
        """Delete an object by kind or plural (emits DELETED); KeyError if it does not exist."""
        return self._store.delete(kind_or_plural, name=name, namespace=namespace)

    def load_rbac(self, objects: Iterable[Obj]) -> None:
        """Replace the Roles, ClusterRoles and bindings SubjectAccessReviews are answered from."""
        self.rbac.load(objects)

    def compact(self) -> None:
        """Drop the change history: older resourceVersions and continue tokens now get 410."""
        self._store.compact()

    def backup(self) -> Backup:
        """Every object at the current revision, as an etcd snapshot keeps it."""
        return self._store.backup()

    def restore(self, backup: Backup) -> None:
        """Restore a backup, as etcd restore does: revisions go back, the history is gone.

        Stop the server first and start it after, as the API servers restart on a restore.
        """
        self._store.restore(backup)

    def objects(self, kind_or_plural: str) -> list[Obj]:
        """The current objects of one resource, in the order lists return them."""
        return self._store.objects(kind_or_plural)

    def inject_fault(
        self,
        kind: FaultKind,
        *,
        resource: str | None = None,
        verb: Verb | None = None,
        times: int = 1,
        after_events: int = 0,
        retry_after: int = 1,
        hang_seconds: float = 30.0,
    ) -> Fault:
        """Make the next `times` requests matching resource (plural) and verb misbehave."""
        fault = Fault(
            kind=kind,
            resource=resource,
            verb=verb,
            times=times,
            after_events=after_events,
            retry_after=retry_after,
            hang_seconds=hang_seconds,
        )
        return self._faults.add(fault)

    @property
    def pending_faults(self) -> list[Fault]:
        return self._faults.pending()

    @property
    def requests(self) -> list[RequestRecord]:
        """The most recent requests received (up to 2000), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def history_reads(self) -> int:
        """Changes read from the history by watches so far: tests bound a change's cost by it."""
        return self._store.history_reads

    @property
    def active_watches(self) -> int:
        with self._lock:
            return self._active_watches

    def wait_for_watches(self, count: int = 1, *, timeout: float = 5.0) -> bool:
        """Block until at least `count` watch streams are open; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._active_watches >= count, timeout=timeout)

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig document pointing at this server."""
        user: dict[str, Any] = {"token": self.token or "fake-token"}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakeapi", "cluster": {"server": self.url}}],
            "users": [{"name": "fakeapi", "user": user}],
            "contexts": [{"name": "fakeapi", "context": {"cluster": "fakeapi", "user": "fakeapi"}}],
            "current-context": "fakeapi",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig pointing at this server (start it first); returns the path."""
        if self.port == 0:
            raise RuntimeError("start the server before writing a kubeconfig: no port yet")
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(dump_yaml(self.kubeconfig()) or "")
        return target

    def _record_request(self, method: str, path: str, query: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(RequestRecord(method, path, query))

    def _track_connection(self, conn: socket.socket, *, opened: bool) -> None:
        with self._lock:
            if opened:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _watch_opened(self) -> None:
        with self._lock:
            self._active_watches += 1
            self._lock.notify_all()

    def _watch_closed(self) -> None:
        with self._lock:
            self._active_watches -= 1
            self._lock.notify_all()
