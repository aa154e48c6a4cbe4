"""What the API server and the scheduler refuse before any device is looked at.

- Admin access: a ResourceClaim (or template) with a request asking for `adminAccess` may only be
  created in a namespace labelled `resource.kubernetes.io/admin-access: "true"`. The labels come
  from a Namespace document of the input, else from the synced Namespace; a namespace that is
  neither (not created yet, or never synced) gets "labels unknown" instead of a guess.
- reservedFor: a claim can be reserved for at most 32 consumers where the cluster serves
  resource.k8s.io v1alpha2/v1alpha3, 256 from v1beta1 on; a claim already reserved for that
  many cannot take another pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from claims.whatif.inputs import JSON, InputClaim

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
RESERVED_FOR_MAX = 256
RESERVED_FOR_MAX_ALPHA = 32


def reserved_for_limit(served_version: str) -> int:
    """The reservedFor limit of the resource.k8s.io version the cluster serves."""
    return RESERVED_FOR_MAX_ALPHA if "alpha" in served_version else RESERVED_FOR_MAX


def wants_admin_access(spec: Mapping[str, Any]) -> bool:
    for request in (spec.get("devices") or {}).get("requests") or []:
        if (request.get("exactly") or {}).get("adminAccess"):
            return True
    return False


def api_server_checks(
    claims: Iterable[InputClaim],
    *,
    namespaces: Mapping[str, Mapping[str, str]],
    reserved_limit: int,
) -> tuple[dict[str, str], list[JSON]]:
    """(claim ref -> why it is refused, the checks made) for the claims of the input."""
    refused: dict[str, str] = {}
    checks: list[JSON] = []
    for claim in claims:
        if claim.classic:
            continue
        meta = claim.obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        if not claim.existing and wants_admin_access(claim.obj.get("spec") or {}):
            labels = namespaces.get(namespace)
            if labels is None:
                checks.append(
                    {
                        "claim": claim.ref,
                        "check": "adminAccess",
                        "allowed": None,
                        "message": f"namespace labels unknown: {namespace} is not synced and "
                        f'must be labelled {ADMIN_ACCESS_LABEL}: "true" (paste the Namespace '
                        "to check)",
                    }
                )
            elif labels.get(ADMIN_ACCESS_LABEL) != "true":
                message = (
                    f"refused by the API server: adminAccess needs namespace {namespace} "
                    f'labelled {ADMIN_ACCESS_LABEL}: "true"'
                )
                refused[claim.ref] = f"ResourceClaim {claim.ref}: {message}"
                checks.append(
                    {
                        "claim": claim.ref,
                        "check": "adminAccess",
                        "allowed": False,
                        "message": message,
                    }
                )
            else:
                checks.append(
                    {"claim": claim.ref, "check": "adminAccess", "allowed": True, "message": ""}
                )
        reserved = len((claim.obj.get("status") or {}).get("reservedFor") or [])
        if claim.existing and reserved >= reserved_limit:
            message = f"already reserved for the maximum of {reserved_limit} consumers"
            refused[claim.ref] = f"ResourceClaim {claim.ref} is {message}"
            checks.append(
                {"claim": claim.ref, "check": "reservedFor", "allowed": False, "message": message}
            )
    return refused, checks
