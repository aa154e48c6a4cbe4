"""What the overview page shows: device counts per driver and class, free physical units per
class, the utilisation chart, incomplete pools and pending claims. Plain functions of the
database; the view only renders.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q, Window
from django.utils import timezone

from claims.choices import ClaimState
from claims.devices.availability import class_availability
from claims.devices.classes import (
    ClassMembership,
    Holds,
    class_membership,
    class_utilisation,
    held_and_tainted,
)
from claims.devices.counts import COUNT_KEYS, available_count, driver_utilisation
from claims.devices.pages import bar_segments, percent
from claims.models import ResourceClaim, UtilisationSample
from inventory.models import Node, Pool, SyncState
from inventory.visibility import EVERYTHING, Visibility, scope_namespaced

CHART_WIDTH = 1100
CHART_HEIGHT = 230
CHART_PAD = 40
# Drivers get colours (and dash patterns) that no device state uses: blue, purple, green,
# amber, orange and red mean allocated, shared, free, admin, tainted and unhealthy elsewhere.
CHART_COLOURS = ("#0e7490", "#c11574", "#5b6b0f", "#7a5230", "#344054", "#0891b2")
CHART_DASHES = ("", "6 3", "2 3", "10 3 2 3", "1 2", "8 6")
CHART_MAX_POINTS = 240


def utilisation_chart(*, hours: int = 24) -> dict[str, Any]:
    """Polylines (allocated / total per driver over time) for an inline SVG, from samples."""

    since = timezone.now() - timedelta(hours=hours)
    samples = list(
        UtilisationSample.objects.filter(taken_at__gte=since).values_list(
            "taken_at", "driver", "allocated", "total"
        )
    )
    plot_w, plot_h = CHART_WIDTH - 2 * CHART_PAD, CHART_HEIGHT - 2 * CHART_PAD
    chart: dict[str, Any] = {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "pad": CHART_PAD,
        "right": CHART_WIDTH - CHART_PAD,
        "bottom": CHART_HEIGHT - CHART_PAD,
        "series": [],
        "gridlines": [
            {"y": round(CHART_PAD + plot_h * (1 - f / 100), 1), "label": f"{f}%"}
            for f in (0, 25, 50, 75, 100)
        ],
        "hours": hours,
    }
    if not samples:
        return chart
    start = min(s[0] for s in samples)
    end = max(s[0] for s in samples)
    span = max((end - start).total_seconds(), 1.0)
    by_driver: dict[str, list[tuple[float, float]]] = {}
    for taken_at, driver, allocated, total in samples:
        x = CHART_PAD + plot_w * (taken_at - start).total_seconds() / span
        y = CHART_PAD + plot_h * (1 - (allocated / total if total else 0.0))
        by_driver.setdefault(driver, []).append((round(x, 1), round(y, 1)))
    for index, (driver, points) in enumerate(sorted(by_driver.items())):
        step = max(1, len(points) // CHART_MAX_POINTS)
        kept = points[::step]
        chart["series"].append(
            {
                "driver": driver,
                "colour": CHART_COLOURS[index % len(CHART_COLOURS)],
                "dash": CHART_DASHES[index % len(CHART_DASHES)],
                "points": " ".join(f"{x},{y}" for x, y in kept),
                "last": samples and kept[-1],
            }
        )
    chart["start"] = start
    chart["end"] = end
    return chart


def overview_context(seen: Visibility = EVERYTHING) -> dict[str, Any]:
    """Everything the overview template shows, in a fixed number of queries; pending claims
    only of the namespaces `seen` allows (capacity is the same for everyone)."""

    # One read of the class membership and the holds for the device, class and unit counts.
    membership = class_membership()
    holds = held_and_tainted(membership)
    drivers = driver_utilisation(holds=holds)
    totals = dict.fromkeys(COUNT_KEYS, 0)
    rows = []
    for driver, counts in sorted(drivers.items()):
        for key in totals:
            totals[key] += counts.get(key, 0)
        rows.append({"driver": driver, "counts": counts, "segments": _segments(counts)})
    totals["available"] = available_count(totals)
    totals["unavailable"] = totals["tainted"] + totals["blocked"]
    nodes = Node.objects.aggregate(total=Count("pk"), ready=Count("pk", filter=Q(ready=True)))
    classes = class_counts(membership=membership, holds=holds)
    availability = availability_rows(membership=membership, holds=holds)
    # The first ten rows and the count of all in one query: a window count runs before LIMIT.
    everything = Window(Count("pk"))
    incomplete = list(
        Pool.objects.filter(complete=False)
        .annotate(matching=everything)
        .order_by("driver", "name")[:10]
    )
    pending = list(
        scope_namespaced(ResourceClaim.objects.filter(state=ClaimState.PENDING), seen)
        .only("pk", "namespace", "name", "device_classes", "diagnosis", "created_at")
        .annotate(matching=everything)
        .order_by("-created_at")[:10]
    )
    return {
        "totals": totals,
        "drivers": rows,
        "classes": classes,
        "availability": availability,
        "nodes": nodes,
        "utilisation": percent(totals["allocated"], totals["total"]),
        "incomplete_pools": incomplete,
        "incomplete_count": _window_total(incomplete),
        "pending_claims": pending,
        "pending_count": _window_total(pending),
        "sync_states": list(SyncState.objects.all()),
        "chart": utilisation_chart(),
    }


def _window_total(rows: list[Any]) -> int:
    return int(rows[0].matching) if rows else 0


def class_counts(
    *, membership: ClassMembership | None = None, holds: Holds | None = None
) -> dict[str, Any]:
    """What `claims.devices.classes.class_utilisation` reports, with each class's stacked bar.

    Membership is exact (every CEL selector of the class, as the scheduler evaluates them) and
    cached in process memory until slices or classes change; the holds are counted each time.
    """

    report = class_utilisation(membership=membership, holds=holds)
    for entry in report["classes"]:
        found = entry["devices"]
        entry["segments"] = _segments(found) if found is not None else []
    return report


def availability_rows(
    *, membership: ClassMembership | None = None, holds: Holds | None = None
) -> list[dict[str, Any]]:
    """`claims.devices.availability.class_availability` (free physical units and partitions per
    class, the API's and the metrics' numbers), each with the share of its units in use."""
    rows = class_availability(membership=membership, holds=holds)
    for row in rows:
        units = row["physical"]
        row["used_percent"] = (
            percent(units["total"] - units["free"], units["total"]) if units else 0
        )
    return rows


def _segments(counts: dict[str, int]) -> list[tuple[str, float]]:
    return bar_segments(counts, counts.get("total", 0))
