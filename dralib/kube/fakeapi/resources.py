"""The resources the fake API server knows, per API version, and the discovery documents it serves.

The tables follow what real API servers registered in each DRA era (see the version table in
DESIGN.md): v1alpha2 is the classic 1.27-1.30 API, v1alpha3 the 1.31-1.33 structured-parameters
API, v1beta1/v1beta2/v1 the later ones. Groups GA long before DRA (scheduling.k8s.io, policy)
and events.k8s.io are served at their one version whatever the era (the core group's v1 events
are left out: the dashboard reads events.k8s.io/v1). Plurals are unique across the groups
served, so the store keys objects by plural alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

DRA_GROUP = "resource.k8s.io"
# Newest first: this is also the priority order real servers use in /apis.
DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1", "v1alpha3", "v1alpha2")
SCHEDULING_GROUP = "scheduling.k8s.io"
POLICY_GROUP = "policy"
EVENTS_GROUP = "events.k8s.io"

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]


@dataclass(frozen=True)
class ResourceType:
    """One kind the server stores: its plural (the URL word), kind, group and scope."""

    plural: str
    kind: str
    group: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    has_status: bool = False

    @property
    def singular(self) -> str:
        return self.kind.lower()


_ALL: tuple[ResourceType, ...] = (
    ResourceType("nodes", "Node", "", False, ("no",), True),
    ResourceType("pods", "Pod", "", True, ("po",), True),
    ResourceType("resourcequotas", "ResourceQuota", "", True, ("quota",), True),
    ResourceType("limitranges", "LimitRange", "", True, ("limits",)),
    ResourceType("namespaces", "Namespace", "", False, ("ns",), True),
    ResourceType("resourceslices", "ResourceSlice", DRA_GROUP, False),
    ResourceType("deviceclasses", "DeviceClass", DRA_GROUP, False),
    ResourceType("resourceclaims", "ResourceClaim", DRA_GROUP, True, (), True),
    ResourceType("resourceclaimtemplates", "ResourceClaimTemplate", DRA_GROUP, True),
    ResourceType("devicetaintrules", "DeviceTaintRule", DRA_GROUP, False),
    ResourceType("resourceclasses", "ResourceClass", DRA_GROUP, False),
    ResourceType("podschedulingcontexts", "PodSchedulingContext", DRA_GROUP, True, (), True),
    ResourceType("resourceclaimparameters", "ResourceClaimParameters", DRA_GROUP, True),
    ResourceType("resourceclassparameters", "ResourceClassParameters", DRA_GROUP, True),
    ResourceType("priorityclasses", "PriorityClass", SCHEDULING_GROUP, False, ("pc",)),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", POLICY_GROUP, True, ("pdb",), True),
    ResourceType("events", "Event", EVENTS_GROUP, True, ("ev",)),
)

RESOURCES: dict[str, ResourceType] = {r.plural: r for r in _ALL}
CORE_PLURALS: tuple[str, ...] = ("nodes", "pods", "resourcequotas", "limitranges", "namespaces")

# Groups every supported release (1.27+) serves at one GA version, whatever its DRA era:
# group -> (version, plurals). They are listed in /apis beside resource.k8s.io.
FIXED_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    SCHEDULING_GROUP: ("v1", ("priorityclasses",)),
    POLICY_GROUP: ("v1", ("poddisruptionbudgets",)),
    EVENTS_GROUP: ("v1", ("events",)),
}

_STRUCTURED = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")
DRA_PLURALS_BY_VERSION: dict[str, tuple[str, ...]] = {
    "v1": (*_STRUCTURED, "devicetaintrules"),
    "v1beta2": (*_STRUCTURED, "devicetaintrules"),
    "v1beta1": _STRUCTURED,
    # 1.31 shipped PodSchedulingContext in v1alpha3; 1.33 added DeviceTaintRule there.
    "v1alpha3": (*_STRUCTURED, "devicetaintrules", "podschedulingcontexts"),
    "v1alpha2": (
        "podschedulingcontexts",
        "resourceclaimparameters",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceclassparameters",
        "resourceclasses",
        "resourceslices",
    ),
}

# The Kubernetes minor release whose newest DRA version is the key, for /version.
_MINOR_BY_NEWEST = {"v1": 34, "v1beta2": 33, "v1beta1": 32, "v1alpha3": 31, "v1alpha2": 30}

_KIND_INDEX: dict[str, ResourceType] = {r.kind.lower(): r for r in _ALL}


def resource_type(kind_or_plural: str) -> ResourceType:
    """The resource named by plural ("resourceslices") or kind ("ResourceSlice"); ValueError."""
    found = RESOURCES.get(kind_or_plural) or _KIND_INDEX.get(kind_or_plural.lower())
    if found is None:
        raise ValueError(f"unknown kind or resource {kind_or_plural!r}")
    return found


def resource_type_of(obj: dict[str, Any]) -> ResourceType:
    """The resource an object belongs to, from its apiVersion and kind, or raise ValueError."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"object {_describe(obj)}: field 'kind' is missing or not a string")
    if not isinstance(api_version, str) or not api_version:
        raise ValueError(f"object {_describe(obj)}: field 'apiVersion' is missing or not a string")
    found = _KIND_INDEX.get(kind.lower())
    if found is None or found.kind != kind:
        raise ValueError(f"object {_describe(obj)}: field 'kind' names an unknown kind {kind!r}")
    group = api_version.rpartition("/")[0]
    if group != found.group:
        raise ValueError(
            f"object {_describe(obj)}: field 'apiVersion' {api_version!r} is not in group "
            f"{found.group or 'core'!r} of {kind}"
        )
    return found


def _describe(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"{obj.get('kind', '?')}/{name or '?'}"


def validate_versions(versions: Iterable[str]) -> tuple[str, ...]:
    """Return the served versions newest first, or raise ValueError naming an unknown one."""
    wanted = set()
    for version in versions:
        if version not in DRA_PLURALS_BY_VERSION:
            known = ", ".join(DRA_VERSIONS)
            raise ValueError(f"unknown {DRA_GROUP} version {version!r} (known: {known})")
        wanted.add(version)
    return tuple(v for v in DRA_VERSIONS if v in wanted)


def version_info(served: tuple[str, ...]) -> dict[str, Any]:
    """The /version document of a release that serves these DRA versions."""
    minor = _MINOR_BY_NEWEST[served[0]] if served else 29
    return {
        "major": "1",
        "minor": str(minor),
        "gitVersion": f"v1.{minor}.0-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def core_api_versions(server_address: str) -> dict[str, Any]:
    """The /api document."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _resource_entries(plurals: Iterable[str]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for plural in plurals:
        rt = RESOURCES[plural]
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(_VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        entries.append(entry)
        if rt.has_status:
            entries.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(_STATUS_VERBS),
                }
            )
    return entries


def core_resource_list() -> dict[str, Any]:
    """The /api/v1 APIResourceList."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": _resource_entries(sorted(CORE_PLURALS)),
    }


def dra_group(served: tuple[str, ...]) -> dict[str, Any]:
    """The APIGroup entry for resource.k8s.io; the preferred version is the newest served."""
    versions = [{"groupVersion": f"{DRA_GROUP}/{v}", "version": v} for v in served]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": DRA_GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def fixed_group(group: str) -> dict[str, Any]:
    """The APIGroup document of one of FIXED_GROUPS."""
    version = FIXED_GROUPS[group][0]
    entry = {"groupVersion": f"{group}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [entry],
        "preferredVersion": entry,
    }


def fixed_resource_list(group: str) -> dict[str, Any]:
    """The /apis/<group>/<version> APIResourceList of one of FIXED_GROUPS."""
    version, plurals = FIXED_GROUPS[group]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": _resource_entries(sorted(plurals)),
    }


def group_list(served: tuple[str, ...]) -> dict[str, Any]:
    """The /apis APIGroupList: the fixed groups, and resource.k8s.io when DRA is served."""
    groups = []
    for document in [fixed_group(g) for g in FIXED_GROUPS] + (
        [dra_group(served)] if served else []
    ):
        del document["kind"], document["apiVersion"]
        groups.append(document)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def dra_resource_list(version: str) -> dict[str, Any]:
    """The /apis/resource.k8s.io/<version> APIResourceList."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{DRA_GROUP}/{version}",
        "resources": _resource_entries(sorted(DRA_PLURALS_BY_VERSION[version])),
    }
