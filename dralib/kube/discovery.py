"""Discovery: which version of each kind the API server serves, newest first.

Reads the resource.k8s.io APIGroup document and the APIResourceList of each served version. A
cluster without the group (404) is a normal answer, not an error: its DRA kinds are reported as
not served, with a message saying why. Kinds of other groups (scheduling.k8s.io, policy) are
looked up in their version's APIResourceList.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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


class _Group:
    """The resource.k8s.io group as one server serves it, read lazily and once."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._versions: tuple[str, ...] | None = None
        self._resources: dict[str, frozenset[str]] = {}

    def versions(self) -> tuple[str, ...]:
        if self._versions is None:
            try:
                doc = self.client.get(f"/apis/{DRA_GROUP}")
            except ApiStatusError as exc:
                if exc.status != 404:
                    raise
                doc = {}
            offered = {
                str(v.get("version"))
                for v in doc.get("versions") or []
                if isinstance(v, dict) and v.get("version")
            }
            self._versions = tuple(v for v in DRA_VERSIONS if v in offered)
        return self._versions

    def resources(self, version: str) -> frozenset[str]:
        if version not in self._resources:
            try:
                doc = self.client.get(f"/apis/{DRA_GROUP}/{version}")
            except ApiStatusError as exc:
                if exc.status != 404:
                    raise
                doc = {}
            self._resources[version] = frozenset(
                str(r.get("name"))
                for r in doc.get("resources") or []
                if isinstance(r, dict) and "/" not in str(r.get("name", "/"))
            )
        return self._resources[version]


def discover(client: KubeClient, kinds: Iterable[KindSpec] | None = None) -> dict[str, Served]:
    """The version to watch for each kind (all synced kinds by default), by kind name.

    Transport and server errors propagate (the caller backs off); "not served" does not.
    """
    group = _Group(client)
    found: dict[str, Served] = {}
    for spec in kinds if kinds is not None else KINDS.values():
        found[spec.kind] = _discover_one(group, spec)
    return found


def _served_elsewhere(client: KubeClient, spec: KindSpec) -> Served:
    """A kind of a group outside resource.k8s.io: its APIResourceList must name it."""
    for version in spec.versions:
        try:
            doc = client.get(f"/apis/{spec.group}/{version}")
        except ApiStatusError as exc:
            if exc.status != 404:
                raise
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
        return _served_elsewhere(group.client, spec)
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
