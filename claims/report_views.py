"""Pages of computed reports (leaked allocations). Kept apart from `claims/views.py`: they call
one report function each and render its result."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from claims.leaks import KINDS, leak_report
from dashboard.views import read_access, render_page


@read_access
def leak_list(request: HttpRequest) -> HttpResponse:
    """Claims that hold devices for nobody, by kind, with how long each has been so."""
    report = leak_report()
    kind = request.GET.get("kind", "")
    if kind in KINDS:
        report["leaks"] = [leak for leak in report["leaks"] if leak["kind"] == kind]
    return render_page(
        request,
        template="claims/leak_list.html",
        context={"report": report, "kinds": KINDS, "kind": kind},
        fragments={"table": "claims/_leak_table.html"},
        live=["claims", "pods", "pools"],
    )
