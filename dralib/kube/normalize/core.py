"""Core kinds the dashboard reads (Node, Namespace, Pod, ResourceQuota, LimitRange), and the
PriorityClass (scheduling.k8s.io/v1) and PodDisruptionBudget (policy/v1) preemption reads, and
the Events (events.k8s.io/v1) the claim and pod pages show: light checks of the fields it uses.

Pods from 1.27-1.30 name their claim under `source`; that moves up to the flat 1.31+ form.
"""

from __future__ import annotations

from typing import Any

from .schema import BOOL, INT, INT_OR_PERCENT, QUANTITY, STR, ListOf, MapOf, Obj, Shape, obj
from .shapes import CONDITION, STRINGS

SCHEDULING_V1 = "scheduling.k8s.io/v1"
POLICY_V1 = "policy/v1"
EVENTS_V1 = "events.k8s.io/v1"

_CLAIM_NAMES: dict[str, Shape] = {"resourceClaimName": STR, "resourceClaimTemplateName": STR}
_POD_CLAIM = Obj({"name": STR, "source": Obj(_CLAIM_NAMES), **_CLAIM_NAMES}, frozenset({"name"}))
_CONTAINER = obj(
    required=("name",),
    name=STR,
    resources=obj(
        claims=ListOf(obj(required=("name",), name=STR, request=STR)),
        requests=MapOf(QUANTITY),
        limits=MapOf(QUANTITY),
    ),
)
_NODE_CONDITION = CONDITION.extend(lastHeartbeatTime=STR)

KINDS: dict[str, Obj] = {
    "Node": obj(
        spec=obj(
            unschedulable=BOOL,
            taints=ListOf(obj(required=("key", "effect"), key=STR, value=STR, effect=STR)),
        ),
        status=obj(
            capacity=MapOf(QUANTITY),
            allocatable=MapOf(QUANTITY),
            conditions=ListOf(_NODE_CONDITION),
        ),
    ),
    # Only metadata (labels) is read; the rest passes through unchecked.
    "Namespace": obj(spec=obj(finalizers=STRINGS), status=obj(phase=STR)),
    "Pod": obj(
        spec=obj(
            nodeName=STR,
            schedulerName=STR,
            resourceClaims=ListOf(_POD_CLAIM),
            containers=ListOf(_CONTAINER),
            initContainers=ListOf(_CONTAINER),
        ),
        status=obj(
            phase=STR,
            conditions=ListOf(CONDITION),
            resourceClaimStatuses=ListOf(obj(required=("name",), name=STR, resourceClaimName=STR)),
            nominatedNodeName=STR,
        ),
    ),
    "ResourceQuota": obj(
        spec=obj(hard=MapOf(QUANTITY), scopes=STRINGS),
        status=obj(hard=MapOf(QUANTITY), used=MapOf(QUANTITY)),
    ),
    "LimitRange": obj(
        spec=obj(
            limits=ListOf(
                obj(
                    required=("type",),
                    type=STR,
                    max=MapOf(QUANTITY),
                    min=MapOf(QUANTITY),
                    default=MapOf(QUANTITY),
                    defaultRequest=MapOf(QUANTITY),
                    maxLimitRequestRatio=MapOf(QUANTITY),
                )
            )
        ),
    ),
}


_LABEL_SELECTOR = obj(
    matchLabels=MapOf(STR),
    matchExpressions=ListOf(
        obj(required=("key", "operator"), key=STR, operator=STR, values=STRINGS)
    ),
)

_OBJECT_REFERENCE = obj(
    kind=STR,
    namespace=STR,
    name=STR,
    uid=STR,
    apiVersion=STR,
    resourceVersion=STR,
    fieldPath=STR,
)

# Kinds of groups GA long before DRA, served at one version: (apiVersion, kind) -> shape.
GROUPED_KINDS: dict[tuple[str, str], Obj] = {
    # What the claim and pod pages show of an event; times are RFC 3339 strings (MicroTime).
    (EVENTS_V1, "Event"): obj(
        regarding=_OBJECT_REFERENCE,
        related=_OBJECT_REFERENCE,
        reason=STR,
        note=STR,
        type=STR,
        action=STR,
        reportingController=STR,
        reportingInstance=STR,
        eventTime=STR,
        series=obj(count=INT, lastObservedTime=STR),
        deprecatedCount=INT,
        deprecatedFirstTimestamp=STR,
        deprecatedLastTimestamp=STR,
        deprecatedSource=obj(component=STR, host=STR),
    ),
    (SCHEDULING_V1, "PriorityClass"): Obj(
        {"value": INT, "globalDefault": BOOL, "preemptionPolicy": STR, "description": STR},
        frozenset({"value"}),
    ),
    (POLICY_V1, "PodDisruptionBudget"): obj(
        spec=obj(
            selector=_LABEL_SELECTOR,
            minAvailable=INT_OR_PERCENT,
            maxUnavailable=INT_OR_PERCENT,
            unhealthyPodEvictionPolicy=STR,
        ),
        status=obj(
            disruptionsAllowed=INT,
            currentHealthy=INT,
            desiredHealthy=INT,
            expectedPods=INT,
            observedGeneration=INT,
            disruptedPods=MapOf(STR),
            conditions=ListOf(CONDITION),
        ),
    ),
}


def pod_to_current(pod: dict[str, Any]) -> None:
    """Flatten 1.27-1.30 `resourceClaims[].source` into the entry itself."""
    spec = pod.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    for claim in claims or []:
        source = claim.pop("source", None)
        for key, value in (source or {}).items():
            claim.setdefault(key, value)
