"""What the claims pages show, computed from rows: quota lines, template use, leak ages,
what-if results.

No request here: `claims.views` (and the console's what-if page) translate requests into calls
of these functions and render the result (the rule is in `claims/views/__init__.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from fractions import Fraction
from typing import Any

from django.db.models import Count
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from claims.devices.pages import natural_key, pool_context
from claims.models import ResourceClaim, ResourceClaimTemplate, ResourceQuota
from dralib.allocator.quantity import exact_amount
from inventory.models import Node, Pool
from inventory.visibility import EVERYTHING, Visibility

# Quota keys for DRA look like `<class>.deviceclass.resource.k8s.io/devices`.
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
# The page asks for a window of NODES_LIMIT_DEFAULT nodes; a longer one (nodesLimit) shows
# this many of its fitting nodes.
MAX_PLACEMENTS_SHOWN = 100


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


def other_quota_rows(quota: ResourceQuota) -> list[dict[str, Any]]:
    """The lines of one ResourceQuota that are not device classes (cpu, memory, pods, ...).

    Same shape and exact comparison as `quota_rows`, with `resource` naming the line.
    """
    device_keys = {line["key"] for line in quota_rows(quota)}
    rows = []
    for key, hard in sorted((quota.hard or {}).items()):
        if key in device_keys:
            continue
        used = (quota.used or {}).get(key, "0")
        used_n, hard_n = _amount(used), _amount(hard)
        fraction = 0.0
        if used_n is not None and hard_n:
            fraction = round(100.0 * float(used_n / hard_n), 1)
        rows.append(
            {
                "resource": key,
                "used": used,
                "hard": hard,
                "percent": min(100.0, max(0.0, fraction)),
                "full": used_n is not None and bool(hard_n) and used_n >= hard_n,
                "unparseable": used_n is None or hard_n is None,
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


def duration_text(seconds: float) -> str:
    """A length of time as a person says it, two units at most: "42 s", "12 min",
    "3 h 12 min", "4 d 6 h", "325 d"."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days >= 10:
        return f"{days} d"
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


def leak_rows(leaks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The leak report's entries for the page: `since` as a time, the age in words."""
    rows = []
    for leak in leaks:
        since = parse_datetime(leak["since"]) if leak.get("since") else None
        age = leak.get("age_seconds")
        rows.append(
            {
                **leak,
                "since_at": since,
                "since_text": _exact(since) if since else "",
                "age_text": duration_text(age) if age is not None else "",
            }
        )
    return rows


def _exact(moment: datetime) -> str:
    return str(timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z"))


def _placements(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Fitting schedulable nodes, each with the devices its first copy gets and its copies.

    The devices come from the per-node verdicts (`nodes`), taken before copies were placed:
    `placements` loses the devices of nodes that later filled up with copies.
    """
    copies = {
        str(p.get("node")): int(p.get("copies") or 0)
        for p in (answer.get("headroom") or {}).get("placements") or []
    }
    rows = []
    for entry in answer.get("nodes") or []:
        if not (entry.get("fits") and entry.get("schedulable")):
            continue
        devices = [d for claim in entry.get("claims") or [] for d in claim.get("devices") or []]
        rows.append(
            {
                "node": entry.get("node"),
                "devices": devices,
                "copies": copies.get(str(entry.get("node")), 0),
            }
        )
    if not rows:
        # Older answers (or a cached one) without per-node verdicts.
        rows = [
            {**p, "copies": copies.get(str(p.get("node")), 0)}
            for p in answer.get("placements") or []
        ]
    # Nodes that took copies first, in the order the copies were placed.
    order = {node: index for index, node in enumerate(copies)}
    rows.sort(key=lambda r: (order.get(str(r["node"]), len(order)), str(r["node"])))
    return rows


def _nodes_page(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The window of nodes the answer holds, said as "nodes 1-100 of 5,000", with the offsets
    of the previous and next windows (None at either end); None when the answer shows every
    node or none (and for answers kept before windows existed)."""
    page = answer.get("nodesPage")
    if not isinstance(page, dict) or not page.get("total"):
        return None
    offset, total = int(page.get("offset") or 0), int(page["total"])
    limit = page.get("limit")
    if offset == 0 and page.get("next") is None:
        return None
    step = int(limit) if limit else total
    # Past the last node (an offset typed by hand) `first` exceeds `last`: the page says so.
    return {
        "first": min(offset, total) + 1,
        "last": min(total, offset + int(page.get("returned") or 0)),
        "total": total,
        "previous": max(0, offset - step) if offset > 0 else None,
        "next": page.get("next"),
    }


def _quota(answer: dict[str, Any], count: int) -> dict[str, Any]:
    """The quota check said per copy: what one copy needs and how many copies fit under it."""
    quota = dict(answer.get("quota") or {})
    lines = []
    for item in quota.get("items") or []:
        requested = _amount(item.get("requestedQuantity", item.get("requested")))
        per_copy = requested / count if requested is not None and count else requested
        lines.append(
            {
                **item,
                "per_copy": _plain(per_copy) if per_copy is not None else item.get("requested"),
            }
        )
    quota["lines"] = lines
    return quota


def _plain(amount: Fraction) -> str:
    return str(amount.numerator) if amount.denominator == 1 else str(float(amount))


def shape_what_if(
    answer: dict[str, Any],
    *,
    asked: str = "",
    with_grids: bool = True,
    seen: Visibility = EVERYTHING,
) -> dict[str, Any]:
    """A `what_if` answer for the page: a headline that counts quota and filters, placements
    with devices and copies per node, the quota per copy, stranded units, pool grids with the
    first placement's devices highlighted (not `with_grids`: a kept answer's pools have moved
    on since). `asked` is the count as typed ("max" is said as such)."""

    summary = answer.get("summary") or {}
    count = int(summary.get("count") or 1)
    placements = _placements(answer)
    chosen: dict[tuple[str, str], set[str]] = {}
    first = answer.get("firstPlacement") or (placements[0] if placements else {})
    for result in first.get("devices") or []:
        chosen.setdefault((str(result["driver"]), str(result["pool"])), set()).add(
            str(result["device"])
        )
    grids = []
    for (driver, pool_name), names in sorted(chosen.items()) if with_grids else ():
        pool = Pool.objects.filter(driver=driver, name=pool_name).first()
        if pool is not None:
            grids.append(pool_context(pool, chosen=names, seen=seen))
    headroom = dict(answer.get("headroom") or {})
    quota = _quota(answer, count)
    allowed = quota.get("copiesAllowed")
    placed = int(headroom.get("placed") or 0)
    admitted = min(placed, allowed) if allowed is not None else placed
    return {
        "headline": _headline(answer, count=count, admitted=admitted, quota=quota),
        "asked_max": asked.strip().lower() == "max",
        "stranded": _stranded(summary.get("stranded")),
        "filtered": _filtered(answer),
        # Nodes an add-nodes assumption made up have no page to link to.
        "real_nodes": _real_nodes(answer, placements[:MAX_PLACEMENTS_SHOWN]),
        "fits": bool(answer.get("fits")),
        "simulated": answer.get("fits") is not None,
        "count": count,
        "placements": placements[:MAX_PLACEMENTS_SHOWN],
        "more_placements": max(0, len(placements) - MAX_PLACEMENTS_SHOWN),
        "nodes_page": _nodes_page(answer),
        "summary": summary,
        "headroom": headroom,
        "quota": quota,
        # Copies that both fit on devices and pass quota admission.
        "admitted": admitted,
        "reasons": list(answer.get("reasons") or []),
        "diagnosis": answer.get("diagnosis"),
        # Every pod of the input, placed in turn (with or without claims).
        "pods": list(answer.get("pods") or []),
        "grids": grids,
        "gave_up": (answer.get("gaveUp") or {}).get("message", ""),
        "assumed": list(answer.get("assumed") or []),
        "cluster": dict(answer.get("cluster") or {}),
        # Asked for and the pod fits nowhere: who preemption would evict, and where.
        "preemption": answer.get("preemption"),
    }


def _headline(
    answer: dict[str, Any], *, count: int, admitted: int, quota: dict[str, Any]
) -> dict[str, Any]:
    """Whether the question is answered yes, and why not: devices that fit are not enough when
    quota admits no copy (or rejects the one claim)."""
    if not answer.get("fits"):
        return {"fits": False, "reason": ""}
    if quota.get("checked") and not quota.get("allowed") and (count == 1 or not admitted):
        where = quota.get("namespace") or "the namespace"
        what = "rejects the claim" if count == 1 else "admits none of the copies"
        message = str(quota.get("message") or "")
        return {
            "fits": False,
            "reason": f"quota in {where} {what}" + (f": {message}" * bool(message)),
        }
    return {"fits": True, "reason": ""}


def _stranded(stranded: Any) -> dict[str, Any] | None:
    """The stranded summary in words: free units of the asked classes that no further copy can
    use, with the nodes they sit on (the first few)."""
    if not isinstance(stranded, dict) or not stranded.get("total"):
        return None
    by_node = stranded.get("byNode") or {}
    return {
        "total": int(stranded.get("total") or 0),
        "units": int(stranded.get("units") or 0),
        "nodes": sorted(by_node.items(), key=lambda item: natural_key(str(item[0])))[:10],
        "more_nodes": max(0, len(by_node) - 10),
    }


def _filtered(answer: dict[str, Any]) -> list[tuple[str, int]]:
    """Nodes the scheduler's filters removed before devices were tried, per filter (the first
    pod's, which is the gang's or the copies' pod)."""
    pods = answer.get("pods") or []
    counts = ((pods[0].get("filtered") or {}).get("counts") or {}) if pods else {}
    return sorted(((str(k), int(v)) for k, v in counts.items() if v), key=lambda kv: -kv[1])


def _real_nodes(answer: dict[str, Any], placements: list[dict[str, Any]]) -> set[str]:
    """The answer's node names that are nodes of the cluster (one query)."""
    names = {str(p.get("node")) for p in placements if p.get("node")}
    names.update(str(p.get("node")) for p in answer.get("pods") or [] if p.get("node"))
    first = (answer.get("summary") or {}).get("firstNode")
    if first:
        names.add(str(first))
    if not names:
        return set()
    return set(Node.objects.filter(name__in=names).values_list("name", flat=True))
