"""Pages of the dashboard app (overview, sync status, what-if) and the helpers every page uses.

Every page is a plain view that renders a full template, or one of its `_fragment.html`
templates when asked with `?fragment=<name>`: the live layer re-fetches fragments through the
same view, so permissions, filters and rendering have one code path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

PAGE_SIZE = 50

View = TypeVar("View", bound=Callable[..., HttpResponse])


def read_access(view: View) -> View:
    """Signed-in users only, unless settings.PUBLIC_READ opens read-only pages to everyone."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not (settings.PUBLIC_READ or request.user.is_authenticated):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


def fragment_url(request: HttpRequest, name: str) -> str:
    """The current URL, filters and page kept, asking for one fragment."""
    query = request.GET.copy()
    query["fragment"] = name
    return f"{request.path}?{query.urlencode()}"


def render_page(
    request: HttpRequest,
    *,
    template: str,
    context: dict[str, Any],
    fragments: Mapping[str, str] | None = None,
    live: Iterable[str] = (),
) -> HttpResponse:
    """Render `template`, or the fragment named by `?fragment=`; `live` names followed topics."""
    fragments = fragments or {}
    context["frag"] = {name: fragment_url(request, name) for name in fragments}
    # The live socket refuses anonymous users, so public readers get a static page.
    context["live_topics"] = list(live) if request.user.is_authenticated else []
    wanted = request.GET.get("fragment")
    if wanted:
        if wanted not in fragments:
            raise Http404(f"page {request.path} has no fragment {wanted!r}")
        return render(request, fragments[wanted], context)
    return render(request, template, context)


def paginate(request: HttpRequest, items: QuerySet[Any] | list[Any]) -> Page[Any]:
    """One page of `items`; a bad or out-of-range ?page= shows the nearest page."""
    return Paginator(items, PAGE_SIZE).get_page(request.GET.get("page"))


def apply_filters(
    request: HttpRequest, filterset_class: type[Any], queryset: QuerySet[Any]
) -> tuple[QuerySet[Any], dict[str, str], list[str]]:
    """Filter `queryset` with the shared FilterSet; bad parameters show errors and no rows.

    Returns the rows, the raw parameter values for the form, and error messages that name
    the parameter.
    """
    filterset = filterset_class(request.GET, queryset=queryset, request=request)
    params = {name: request.GET.get(name, "").strip() for name in filterset.filters}
    if not filterset.is_valid():
        errors = [
            f"{field}: {message}"
            for field, messages in filterset.errors.items()
            for message in messages
        ]
        return queryset.none(), params, errors
    return filterset.qs, params, []


def percent(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


CHART_WIDTH = 1100
CHART_HEIGHT = 230
CHART_PAD = 40
CHART_COLOURS = ("#2f5bd3", "#7a4fd1", "#12b76a", "#e0702b", "#c62f3a", "#0e9384")
CHART_MAX_POINTS = 240


def utilisation_chart(*, hours: int = 24) -> dict[str, Any]:
    """Polylines (allocated / total per driver over time) for an inline SVG, from samples."""
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.models import UtilisationSample

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
                "points": " ".join(f"{x},{y}" for x, y in kept),
                "last": samples and kept[-1],
            }
        )
    chart["start"] = start
    chart["end"] = end
    return chart


def overview_context() -> dict[str, Any]:
    from django.db.models import Count, Q, Window

    from claims.choices import ClaimState
    from claims.models import ResourceClaim
    from inventory.models import Node, Pool, SyncState
    from inventory.services import COUNT_KEYS, driver_utilisation

    drivers = driver_utilisation()
    totals = dict.fromkeys(COUNT_KEYS, 0)
    rows = []
    for driver, counts in sorted(drivers.items()):
        for key in totals:
            totals[key] += counts.get(key, 0)
        rows.append({"driver": driver, "counts": counts, "segments": _segments(counts)})
    nodes = Node.objects.aggregate(total=Count("pk"), ready=Count("pk", filter=Q(ready=True)))
    classes = class_counts(drivers)
    # The first ten rows and the count of all in one query: a window count runs before LIMIT.
    everything = Window(Count("pk"))
    incomplete = list(
        Pool.objects.filter(complete=False)
        .annotate(matching=everything)
        .order_by("driver", "name")[:10]
    )
    pending = list(
        ResourceClaim.objects.filter(state=ClaimState.PENDING)
        .only("pk", "namespace", "name", "device_classes", "diagnosis", "created_at")
        .annotate(matching=everything)
        .order_by("-created_at")[:10]
    )
    return {
        "totals": totals,
        "drivers": rows,
        "classes": classes,
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


def class_counts(drivers: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What `inventory.services.class_utilisation` reports, from driver counts already made.

    The overview has just counted devices per driver; counting them again for the classes
    would double the page's only expensive query.
    """
    from inventory.models import DeviceClass
    from inventory.services import CLASS_APPROXIMATION, CLASS_COUNT_KEYS, class_driver

    entries = []
    for device_class in DeviceClass.objects.only("pk", "name", "selectors").order_by("name"):
        driver = class_driver(device_class)
        found = drivers.get(driver, {}) if driver else None
        # The keys class_utilisation publishes; the bar still shows blocked from the driver.
        counts = {key: found.get(key, 0) for key in CLASS_COUNT_KEYS} if found is not None else None
        entries.append(
            {
                "name": device_class.name,
                "driver": driver,
                "devices": counts,
                "segments": _segments(found) if found is not None else [],
            }
        )
    return {"method": CLASS_APPROXIMATION, "classes": entries}


def _segments(counts: dict[str, int]) -> list[tuple[str, float]]:
    from inventory.views import bar_segments

    return bar_segments(counts, counts.get("total", 0))


@read_access
def overview(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        template="dashboard/overview.html",
        context=overview_context(),
        fragments={"body": "dashboard/_overview_body.html"},
        live=["overview"],
    )


@read_access
def sync_status(request: HttpRequest) -> HttpResponse:
    from django.utils import timezone

    from inventory.models import SkippedObject, SyncState

    kind = request.GET.get("kind", "").strip()
    text = request.GET.get("q", "").strip()
    skipped = SkippedObject.objects.all()
    if kind:
        skipped = skipped.filter(kind=kind)
    if text:
        skipped = skipped.filter(name__icontains=text)
    context = {
        "states": list(SyncState.objects.all()),
        "page_obj": paginate(request, skipped),
        "params": {"kind": kind, "q": text},
        "kinds": list(
            SkippedObject.objects.order_by("kind").values_list("kind", flat=True).distinct()
        ),
        "now": timezone.now(),
    }
    return render_page(
        request,
        template="dashboard/sync_status.html",
        context=context,
        fragments={"body": "dashboard/_sync_body.html"},
        live=["sync"],
    )


class WhatIfInputError(ValueError):
    """The what-if form's input cannot be read; the message names the field."""


MAX_WHAT_IF_BYTES = 256 * 1024
MAX_PLACEMENTS_SHOWN = 50


def read_claim_input(*, text: str, upload: Any = None, template: str = "") -> tuple[Any, str]:
    """What to simulate (YAML text or a stored object) and a label saying where it came from.

    An uploaded file wins over the text box, which wins over a picked template
    (`namespace/name` of a stored ResourceClaimTemplate). The what-if service parses the text
    (ResourceClaims, a template, a Pod or workload, several documents) and names bad fields.
    """
    from claims.models import ResourceClaimTemplate

    if upload is not None:
        if upload.size > MAX_WHAT_IF_BYTES:
            raise WhatIfInputError(f"file: {upload.name} is larger than 256 KiB")
        try:
            return upload.read().decode("utf-8"), f"file {upload.name}"
        except UnicodeDecodeError:
            raise WhatIfInputError(f"file: {upload.name} is not UTF-8 text") from None
    if text.strip():
        return text, "pasted YAML"
    if template:
        namespace, _, name = template.partition("/")
        row = ResourceClaimTemplate.objects.filter(namespace=namespace, name=name).first()
        if row is None:
            raise WhatIfInputError(f"template: no ResourceClaimTemplate {template!r}")
        return dict(row.obj), f"ResourceClaimTemplate {template}"
    raise WhatIfInputError("claim: paste or upload a ResourceClaim, or pick a template")


@read_access
def what_if(request: HttpRequest) -> HttpResponse:
    from claims.models import ResourceClaimTemplate
    from claims.services import MAX_COUNT

    context: dict[str, Any] = {
        "templates": list(
            ResourceClaimTemplate.objects.order_by("namespace", "name").values_list(
                "namespace", "name"
            )
        ),
        "max_count": MAX_COUNT,
        "values": {
            "yaml": request.POST.get("yaml", ""),
            "template": request.POST.get("template", request.GET.get("template", "")),
            "count": request.POST.get("count", "1"),
            "node": request.POST.get("node", ""),
            "node_selector": request.POST.get("node_selector", ""),
            "namespace": request.POST.get("namespace", ""),
        },
        "error": "",
        "result": None,
    }
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        context.update(run_what_if(request))
    return render_page(
        request,
        template="dashboard/what_if.html",
        context=context,
        fragments={"result": "dashboard/_whatif_result.html"},
    )


def run_what_if(request: HttpRequest) -> dict[str, Any]:
    """Read the form, ask claims.services.what_if, and shape its answer for the templates."""
    from claims.services import what_if as simulate

    form = request.POST
    try:
        source, label = read_claim_input(
            text=form.get("yaml", ""),
            upload=request.FILES.get("file"),
            template=form.get("template", ""),
        )
        answer = simulate(
            source,
            count=form.get("count", "").strip() or 1,
            node=form.get("node", "").strip() or None,
            node_selector=form.get("node_selector", "").strip() or None,
            namespace=form.get("namespace", "").strip() or None,
        )
    except ValueError as exc:  # WhatIfError is a ValueError naming the field
        return {"error": str(exc)}
    return {"result": shape_what_if(answer), "source": label}


def shape_what_if(answer: dict[str, Any]) -> dict[str, Any]:
    """The service's answer plus pool grids with the first placement's devices highlighted."""
    from inventory.models import Pool
    from inventory.views import pool_context

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
