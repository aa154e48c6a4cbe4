"""What the claims pages show, computed from rows: quota lines, template use, what-if results.

Views translate requests into calls of these functions and render the result (STYLE: views only
translate).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from django.db.models import Count

from claims.allocator.quantity import exact_amount
from claims.devices.pages import pool_context
from claims.models import ResourceClaim, ResourceClaimTemplate, ResourceQuota
from inventory.models import Pool

# Quota keys for DRA look like `<class>.deviceclass.resource.k8s.io/devices`.
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
MAX_PLACEMENTS_SHOWN = 50


def _amount(value: Any) -> Fraction | None:
    """The exact amount of a quota quantity ("2", "1k", "500m"), or None when it is not one."""
    return exact_amount(value if isinstance(value, str | int) else str(value))


def quota_rows(quota: ResourceQuota) -> list[dict[str, Any]]:
    """The device-class lines of one ResourceQuota: class, used, hard and the fraction used.

    Quantities are compared exactly (`1k` is 1000, `500m` is a half). A value that is not a
    quantity is shown as written with `unparseable` naming it; its line has no bar and is never
    full, since nothing can be said about it.
    """
    rows = []
    for key, hard in sorted((quota.hard or {}).items()):
        if not key.endswith(DEVICE_CLASS_QUOTA_SUFFIX):
            continue
        used = (quota.used or {}).get(key, "0")
        used_n, hard_n = _amount(used), _amount(hard)
        bad = [
            f"{name} {value!r}"
            for name, value, n in (("used", used, used_n), ("hard", hard, hard_n))
            if n is None
        ]
        fraction = 0.0
        if used_n is not None and hard_n:
            fraction = round(100.0 * float(used_n / hard_n), 1)
        rows.append(
            {
                "device_class": key.removesuffix(DEVICE_CLASS_QUOTA_SUFFIX),
                "key": key,
                "used": used,
                "hard": hard,
                "percent": min(100.0, max(0.0, fraction)),
                "full": used_n is not None and bool(hard_n) and used_n >= hard_n,
                "unparseable": ", ".join(bad) + " is not a quantity" if bad else "",
            }
        )
    return rows


def template_claim_counts(
    templates: Iterable[ResourceClaimTemplate],
) -> list[tuple[ResourceClaimTemplate, int]]:
    """Each template with the number of ResourceClaims made from it (one grouped query)."""
    templates = list(templates)
    names = [t.name for t in templates]
    claims_from: dict[tuple[str, str], int] = {}
    counted = (
        ResourceClaim.objects.filter(template_name__in=names)
        .values_list("namespace", "template_name")
        .annotate(n=Count("pk"))
        .values_list("namespace", "template_name", "n")
    )
    for namespace, template_name, n in counted:
        claims_from[(namespace, template_name)] = n
    return [(t, claims_from.get((t.namespace, t.name), 0)) for t in templates]


def shape_what_if(answer: dict[str, Any]) -> dict[str, Any]:
    """A `what_if` answer plus pool grids with the first placement's devices highlighted."""

    placements = list(answer.get("placements") or [])
    chosen: dict[tuple[str, str], set[str]] = {}
    for result in (placements[0].get("devices") or []) if placements else []:
        chosen.setdefault((str(result["driver"]), str(result["pool"])), set()).add(
            str(result["device"])
        )
    grids = []
    for (driver, pool_name), names in sorted(chosen.items()):
        pool = Pool.objects.filter(driver=driver, name=pool_name).first()
        if pool is not None:
            grids.append(pool_context(pool, chosen=names))
    return {
        "fits": bool(answer.get("fits")),
        "simulated": answer.get("fits") is not None,
        "placements": placements[:MAX_PLACEMENTS_SHOWN],
        "more_placements": max(0, len(placements) - MAX_PLACEMENTS_SHOWN),
        "summary": answer.get("summary") or {},
        "headroom": answer.get("headroom") or {},
        "quota": answer.get("quota") or {},
        "reasons": list(answer.get("reasons") or []),
        "diagnosis": answer.get("diagnosis"),
        "grids": grids,
    }
