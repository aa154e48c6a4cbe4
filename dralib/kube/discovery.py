"""Discovery: which version of each kind the API server serves, newest first.

Reads the resource.k8s.io APIGroup document and the APIResourceList of each served version. A
cluster without the group (404) is a normal answer, not an error: its DRA kinds are reported as
not served, with a message saying why. Kinds of other groups (scheduling.k8s.io, policy) are
looked up in their version's APIResourceList.

`Discovery` keeps those documents for the watchers of one cluster, as client-go's
discovery/cached/memory client does: the first watcher to need a document reads it, the others
take the same answer (a 404 included: it is an answer, not a fault); a transport or server error
is not kept. A watcher that meets a 404 or finds its kind not served drops the kept documents
(`invalidate`), so that the next lookup reads the server again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dralib.kube.client import ApiStatusError, KubeClient
from dralib.kube.kinds import DRA_GROUP, DRA_VERSIONS, KINDS, KindSpec


@dataclass(frozen=True)
class Served:
    """What discovery found for one kind: the version to watch, or why there is none."""

    kind: str
    version: str | None
    message: str = ""

    @property
    def served(self) -> bool:
        return self.version is not None


class Discovery:
    """Discovery documents of one cluster, shared by its watchers (thread-safe).

    Kept by (server, path): a client of another server never takes this one's answers.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, str], threading.Lock] = {}
        self._documents: dict[tuple[str, str], dict[str, Any]] = {}
        self.reads = 0  # documents read from a server: tests read it

    def document(self, client: KubeClient, path: str) -> dict[str, Any]:
        """The document at `path`, {} where the server answers 404."""
        key = (client.host, path)
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        # One lock per document, held while reading it: watchers starting together make one
        # request per document, and the Event watcher's group is not read after the others'.
        with reading:
            with self._lock:
                if key in self._documents:
                    return self._documents[key]
            try:
                doc = client.get(path)
            except ApiStatusError as exc:
                if exc.status != 404:
                    raise
                doc = {}
            with self._lock:
                self.reads += 1
                self._documents[key] = doc if isinstance(doc, dict) else {}
                return self._documents[key]

    def invalidate(self) -> None:
        """Forget every document: the next lookup reads the server again."""
        with self._lock:
            self._documents.clear()


class _Group:
    """The resource.k8s.io group as one server serves it, read lazily and once."""

    def __init__(self, client: KubeClient, documents: Discovery) -> None:
        self.client = client
        self.documents = documents
        self._versions: tuple[str, ...] | None = None
        self._resources: dict[str, frozenset[str]] = {}

    def versions(self) -> tuple[str, ...]:
        if self._versions is None:
            doc = self.documents.document(self.client, f"/apis/{DRA_GROUP}")
            offered = {
                str(v.get("version"))
                for v in doc.get("versions") or []
                if isinstance(v, dict) and v.get("version")
            }
            self._versions = tuple(v for v in DRA_VERSIONS if v in offered)
        return self._versions

    def resources(self, version: str) -> frozenset[str]:
        if version not in self._resources:
            doc = self.documents.document(self.client, f"/apis/{DRA_GROUP}/{version}")
            self._resources[version] = frozenset(
                str(r.get("name"))
                for r in doc.get("resources") or []
                if isinstance(r, dict) and "/" not in str(r.get("name", "/"))
            )
        return self._resources[version]


def discover(
    client: KubeClient,
    kinds: Iterable[KindSpec] | None = None,
    *,
    documents: Discovery | None = None,
) -> dict[str, Served]:
    """The version to watch for each kind (all synced kinds by default), by kind name.

    `documents` shares what was read with the cluster's other watchers; without it every call
    reads the server. Transport and server errors propagate (the caller backs off); "not
    served" does not.
    """
    group = _Group(client, documents or Discovery())
    found: dict[str, Served] = {}
    for spec in kinds if kinds is not None else KINDS.values():
        found[spec.kind] = _discover_one(group, spec)
    return found


def _served_elsewhere(group: _Group, spec: KindSpec) -> Served:
    """A kind of a group outside resource.k8s.io: its APIResourceList must name it."""
    for version in spec.versions:
        doc = group.documents.document(group.client, f"/apis/{spec.group}/{version}")
        if not doc:
            continue
        names = {str(r.get("name")) for r in doc.get("resources") or [] if isinstance(r, dict)}
        if spec.plural in names:
            return Served(spec.kind, version)
    return Served(
        spec.kind,
        None,
        f"{spec.kind} is not served by this cluster ({spec.group} {', '.join(spec.versions)})",
    )


def _discover_one(group: _Group, spec: KindSpec) -> Served:
    if spec.is_core:
        return Served(spec.kind, spec.versions[0])
    if spec.group != DRA_GROUP:
        return _served_elsewhere(group, spec)
    served = group.versions()
    if not served:
        return Served(
            spec.kind,
            None,
            f"the cluster does not serve {DRA_GROUP} (no Dynamic Resource Allocation API); "
            f"{spec.kind} is not synced",
        )
    for version in spec.versions:
        if version in served and spec.plural in group.resources(version):
            return Served(spec.kind, version)
    return Served(
        spec.kind,
        None,
        f"{spec.kind} is not served by this cluster ({DRA_GROUP} versions: {', '.join(served)})",
    )
