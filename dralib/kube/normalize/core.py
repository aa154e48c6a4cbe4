"""Core kinds the dashboard reads (Node, Namespace, Pod, ResourceQuota, LimitRange): light checks
of the fields it uses.

Pods from 1.27-1.30 name their claim under `source`; that moves up to the flat 1.31+ form.
"""

from __future__ import annotations

from typing import Any

from .schema import BOOL, QUANTITY, STR, ListOf, MapOf, Obj, Shape, obj
from .shapes import CONDITION, STRINGS

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


def pod_to_current(pod: dict[str, Any]) -> None:
    """Flatten 1.27-1.30 `resourceClaims[].source` into the entry itself."""
    spec = pod.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    for claim in claims or []:
        source = claim.pop("source", None)
        for key, value in (source or {}).items():
            claim.setdefault(key, value)
