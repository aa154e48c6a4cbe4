"""The kinds the dashboard syncs: API group, plural, scope and the versions each era served.

Versions are listed newest first; discovery watches the first one the server serves. Core kinds
(Node, Namespace, Pod, ResourceQuota, LimitRange) are always `v1` and need no discovery;
PriorityClass (scheduling.k8s.io), PodDisruptionBudget (policy) and Event (events.k8s.io) have
one GA version, which discovery only confirms.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.StrEnum):
    """Every kind the dashboard syncs, spelled as the API server spells it.

    `inventory.choices.Kind` is the Django choices form of this enum, for model fields.
    """

    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    DEVICE_TAINT_RULE = "DeviceTaintRule"
    NODE = "Node"
    POD = "Pod"
    RESOURCE_QUOTA = "ResourceQuota"
    RESOURCE_CLASS = "ResourceClass"
    POD_SCHEDULING_CONTEXT = "PodSchedulingContext"
    NAMESPACE = "Namespace"
    LIMIT_RANGE = "LimitRange"
    PRIORITY_CLASS = "PriorityClass"
    POD_DISRUPTION_BUDGET = "PodDisruptionBudget"
    EVENT = "Event"


DRA_GROUP = "resource.k8s.io"
# Priority order for discovery: the newest served version wins.
DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1", "v1alpha3", "v1alpha2")
SCHEDULING_GROUP = "scheduling.k8s.io"
POLICY_GROUP = "policy"
EVENTS_GROUP = "events.k8s.io"


@dataclass(frozen=True)
class KindSpec:
    """One synced kind: where it lives in the API and which versions may serve it."""

    kind: str
    group: str
    plural: str
    namespaced: bool
    versions: tuple[str, ...]

    def __post_init__(self) -> None:
        # A plain str, so that the kind hashes and prints as the API server spells it.
        object.__setattr__(self, "kind", str(self.kind))

    @property
    def is_core(self) -> bool:
        return self.group == ""

    def api_version(self, version: str) -> str:
        """The apiVersion string of this kind at `version` ("v1" or "group/version")."""
        return f"{self.group}/{version}" if self.group else version

    def path(self, version: str) -> str:
        """The collection path across all namespaces: /apis/<group>/<version>/<plural>."""
        prefix = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        return f"{prefix}/{self.plural}"


_STRUCTURED = ("v1", "v1beta2", "v1beta1", "v1alpha3")

KINDS: dict[str, KindSpec] = {
    spec.kind: spec
    for spec in (
        KindSpec(Kind.NODE, "", "nodes", False, ("v1",)),
        KindSpec(Kind.NAMESPACE, "", "namespaces", False, ("v1",)),
        KindSpec(Kind.DEVICE_CLASS, DRA_GROUP, "deviceclasses", False, _STRUCTURED),
        KindSpec(Kind.RESOURCE_SLICE, DRA_GROUP, "resourceslices", False, DRA_VERSIONS),
        KindSpec(Kind.DEVICE_TAINT_RULE, DRA_GROUP, "devicetaintrules", False, _STRUCTURED),
        KindSpec(Kind.RESOURCE_CLASS, DRA_GROUP, "resourceclasses", False, ("v1alpha2",)),
        KindSpec(Kind.RESOURCE_CLAIM, DRA_GROUP, "resourceclaims", True, DRA_VERSIONS),
        KindSpec(
            Kind.RESOURCE_CLAIM_TEMPLATE, DRA_GROUP, "resourceclaimtemplates", True, DRA_VERSIONS
        ),
        KindSpec(
            Kind.POD_SCHEDULING_CONTEXT,
            DRA_GROUP,
            "podschedulingcontexts",
            True,
            ("v1alpha3", "v1alpha2"),
        ),
        KindSpec(Kind.POD, "", "pods", True, ("v1",)),
        KindSpec(Kind.RESOURCE_QUOTA, "", "resourcequotas", True, ("v1",)),
        KindSpec(Kind.LIMIT_RANGE, "", "limitranges", True, ("v1",)),
        KindSpec(Kind.PRIORITY_CLASS, SCHEDULING_GROUP, "priorityclasses", False, ("v1",)),
        KindSpec(Kind.POD_DISRUPTION_BUDGET, POLICY_GROUP, "poddisruptionbudgets", True, ("v1",)),
        # events.k8s.io/v1 only (1.19+): core v1 events hold the same objects in an older shape.
        KindSpec(Kind.EVENT, EVENTS_GROUP, "events", True, ("v1",)),
    )
}


def kind_spec(kind: str) -> KindSpec:
    """The spec of a synced kind, or ValueError naming the kinds there are."""
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}; synced kinds: {', '.join(KINDS)}") from None
