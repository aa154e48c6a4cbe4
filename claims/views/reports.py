"""Pages computed across kinds: leaked allocations and the search by name.

Each calls one report or a few bounded queries and renders the result.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse

from claims.leaks import KINDS, leak_report
from claims.models import Pod, ResourceClaim, ResourceClaimTemplate
from claims.pages import duration_text, leak_rows
from dashboard.views import read_access, render_page
from inventory.models import Device, DeviceClass, DeviceTaintRule, Node
from inventory.visibility import scope_namespaced, visibility_for

SEARCH_LIMIT = 20


@read_access
def leak_list(request: HttpRequest) -> HttpResponse:
    """Claims that hold devices for nobody, by kind, with how long each has been so."""
    report = leak_report(visibility=visibility_for(request))
    kind = request.GET.get("kind", "")
    if kind in KINDS:
        report["leaks"] = [leak for leak in report["leaks"] if leak["kind"] == kind]
    context = {
        "report": report,
        "rows": leak_rows(report["leaks"]),
        "threshold": duration_text(report["unreserved_threshold_seconds"]),
        "kinds": KINDS,
        "kind": kind,
    }
    return render_page(
        request,
        template="claims/leak_list.html",
        context=context,
        fragments={"table": "claims/_leak_table.html"},
        live=["claims", "pods", "pools"],
    )


@read_access
def search(request: HttpRequest) -> HttpResponse:
    """Objects of every kind whose name contains `q`, a few per kind."""
    text = request.GET.get("q", "").strip()
    results: list[tuple[str, list[Any], str]] = []
    if text:
        contains = Q(name__icontains=text)
        seen = visibility_for(request)
        kinds: list[tuple[str, Any, str]] = [
            ("Nodes", Node.objects.filter(contains).only("pk", "name"), "node-list"),
            (
                "ResourceClaims",
                scope_namespaced(ResourceClaim.objects.filter(contains), seen),
                "claim-list",
            ),
            (
                "ResourceClaimTemplates",
                scope_namespaced(ResourceClaimTemplate.objects.filter(contains), seen),
                "",
            ),
            ("Pods", scope_namespaced(Pod.objects.filter(contains), seen), "pod-list"),
            ("DeviceClasses", DeviceClass.objects.filter(contains), "device-class-list"),
            ("Devices", Device.objects.filter(contains, current=True), "device-list"),
            ("DeviceTaintRules", DeviceTaintRule.objects.filter(contains), "taint-rule-list"),
        ]
        for label, queryset, list_name in kinds:
            found = list(queryset.order_by("name")[: SEARCH_LIMIT + 1])
            if found:
                results.append(
                    (label, found[:SEARCH_LIMIT], list_name if len(found) > SEARCH_LIMIT else "")
                )
    return render_page(
        request,
        template="claims/search.html",
        context={"q": text, "results": results, "limit": SEARCH_LIMIT},
    )
