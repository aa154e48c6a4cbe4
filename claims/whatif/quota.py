"""ResourceQuota admission for what-if claims: would the API server reject them, and how many fit.

A ResourceClaim counts toward its namespace's quota as Kubernetes counts it (KEP-4381 and the
extended-resource form of KEP-5004): one `count/resourceclaims.resource.k8s.io`, and per
DeviceClass the devices it may take, as `<class>.deviceclass.resource.k8s.io/devices` and
`requests.deviceclass.resource.kubernetes.io/<class>` (plus `requests.<extendedResourceName>` when
the class names one). ExactCount counts `count`, All counts the allocation maximum (32), and a
`firstAvailable` request counts its largest alternative per class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from claims.whatif.inputs import JSON, InputClaim
from dralib.allocator import ALLOCATION_RESULTS_MAX_SIZE
from dralib.allocator.quantity import Quantity, QuantityError

CLAIM_COUNT_KEY = "count/resourceclaims.resource.k8s.io"


def _device_count(view: Mapping[str, Any]) -> int:
    mode = view.get("allocationMode") or "ExactCount"
    if mode == "All":
        return ALLOCATION_RESULTS_MAX_SIZE
    count = view.get("count")
    return int(count) if isinstance(count, int) and count > 0 else 1


def claim_usage(spec: Mapping[str, Any], *, extended_names: Mapping[str, str]) -> dict[str, int]:
    """What one claim adds to its namespace's quota, per quota resource name."""
    usage: dict[str, int] = {CLAIM_COUNT_KEY: 1}
    per_class: dict[str, int] = {}
    for request in (spec.get("devices") or {}).get("requests") or []:
        alternatives = request.get("firstAvailable") or []
        if alternatives:
            largest: dict[str, int] = {}
            for sub in alternatives:
                name = str(sub.get("deviceClassName") or "")
                largest[name] = max(largest.get(name, 0), _device_count(sub))
            for name, count in largest.items():
                per_class[name] = per_class.get(name, 0) + count
        elif request.get("exactly"):
            name = str(request["exactly"].get("deviceClassName") or "")
            per_class[name] = per_class.get(name, 0) + _device_count(request["exactly"])
    for name, count in per_class.items():
        for key in (
            f"{name}.deviceclass.resource.k8s.io/devices",
            f"requests.deviceclass.resource.kubernetes.io/{name}",
        ):
            usage[key] = usage.get(key, 0) + count
        extended = extended_names.get(name)
        if extended:
            usage[f"requests.{extended}"] = usage.get(f"requests.{extended}", 0) + count
    return usage


def extended_resource_names(classes: Iterable[JSON]) -> dict[str, str]:
    """DeviceClass name -> spec.extendedResourceName, for classes that set one."""
    names = {}
    for device_class in classes:
        extended = (device_class.get("spec") or {}).get("extendedResourceName")
        if extended:
            names[str((device_class.get("metadata") or {}).get("name"))] = str(extended)
    return names


def _number(value: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(value))
    except (QuantityError, ValueError):
        return None


def admission(
    claims: Sequence[InputClaim],
    *,
    namespace: str,
    quotas: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
    classes: Iterable[JSON],
    copies: int,
) -> JSON:
    """Check the claims (times `copies`) against each (name, hard, used) quota of the namespace.

    Only claims the what-if would create count; a pod's existing claims are already counted.
    """
    extended = extended_resource_names(classes)
    per_copy: dict[str, int] = {}
    for claim in claims:
        if claim.existing or claim.classic:
            continue
        for key, value in claim_usage(claim.obj.get("spec") or {}, extended_names=extended).items():
            per_copy[key] = per_copy.get(key, 0) + value
    items: list[JSON] = []
    copies_allowed: int | None = None
    for name, hard, used in quotas:
        for key, hard_value in sorted(hard.items()):
            wanted = per_copy.get(key)
            if not wanted:
                continue
            hard_q = _number(hard_value)
            used_q = _number(used.get(key, "0")) or Quantity.parse("0")
            if hard_q is None:
                continue
            room = hard_q.exact - used_q.exact
            fit_copies = max(int(room // wanted), 0)
            copies_allowed = (
                fit_copies if copies_allowed is None else min(copies_allowed, fit_copies)
            )
            items.append(
                {
                    "quota": name,
                    "resource": key,
                    "hard": str(hard_value),
                    "used": str(used.get(key, "0")),
                    "requested": wanted * copies,
                    "exceeded": used_q.exact + wanted * copies > hard_q.exact,
                }
            )
    rejected = [i for i in items if i["exceeded"]]
    return {
        "namespace": namespace,
        "checked": bool(quotas),
        "allowed": not rejected,
        "items": items,
        "copiesAllowed": copies_allowed,
        "message": (
            "; ".join(
                f"exceeded quota {i['quota']}: requested {i['resource']}={i['requested']}, "
                f"used {i['used']}, limited to {i['hard']}"
                for i in rejected
            )
            if rejected
            else ""
        ),
    }
