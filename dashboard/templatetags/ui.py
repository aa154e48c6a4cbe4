"""Template helpers every page uses: grouped numbers, times that say their zone and age,
sortable column headers and the sidebar links the apps registered."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from dashboard import registry
from dashboard.registry import NavLink

register = template.Library()


@register.filter
def grouped(value: Any) -> str:
    """20424 → "20,424"; anything that is not an integer is shown as given."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "" if value is None else str(value)


@register.filter
def when(value: datetime | None) -> SafeString | str:
    """A <time> with the absolute time and its zone in the title and the age as text.

    static/dashboard/time.js keeps the age ticking; without script the server's age stays.
    """
    if not value:
        return "–"
    local = timezone.localtime(value)
    absolute = local.strftime("%Y-%m-%d %H:%M:%S %Z")
    return format_html(
        '<time class="ago" datetime="{}" title="{}">{} ago</time>',
        local.isoformat(),
        absolute,
        timesince(value).split(",")[0],
    )


@register.filter
def stamp(value: datetime | None) -> SafeString | str:
    """The absolute time with its zone, then the ticking age: "2026-11-23 21:40 UTC (3 min ago)"."""
    if not value:
        return "–"
    local = timezone.localtime(value)
    return format_html(
        '{} (<time class="ago" datetime="{}">{} ago</time>)',
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        local.isoformat(),
        timesince(value).split(",")[0],
    )


@register.simple_tag(takes_context=True)
def sort_header(context: dict[str, Any], field: str, label: str, css: str = "") -> SafeString:
    """A <th> whose link sorts by `field`, reversing when it is the current order."""
    request: HttpRequest = context["request"]
    current = request.GET.get("ordering", "")
    if current == field:
        wanted, state, arrow = f"-{field}", "ascending", " ▲"
    elif current == f"-{field}":
        wanted, state, arrow = field, "descending", " ▼"
    else:
        wanted, state, arrow = field, "none", ""
    query = request.GET.copy()
    query["ordering"] = wanted
    query.pop("page", None)
    query.pop("fragment", None)
    return format_html(
        '<th class="{}" aria-sort="{}"><a class="sort" href="?{}">{}{}</a></th>',
        css,
        state,
        query.urlencode(),
        label,
        arrow,
    )


@register.simple_tag
def nav_links() -> list[NavLink]:
    """The sidebar links the apps registered (`dashboard.registry.register_nav`), in order."""
    return registry.nav_links()


@register.filter
def page_range(paginator: Any, number: int) -> list[Any]:
    """Page numbers around `number`, first and last, with the paginator's ELLIPSIS between."""
    return list(paginator.get_elided_page_range(number, on_each_side=2, on_ends=1))
