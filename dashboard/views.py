"""Pages of the dashboard app (overview, sync status, what-if) and the helpers every page uses.

Every page is a plain view that renders a full template, or one of its `_fragment.html`
templates when asked with `?fragment=<name>`: the live layer re-fetches fragments through the
same view, so permissions, filters and rendering have one code path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import wraps
from typing import Any, TypeVar

import yaml
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
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


def object_yaml(raw: Any) -> str:
    """The object as the API server sent it, in YAML (key order kept, as kubectl shows it)."""
    return yaml.safe_dump(raw, sort_keys=False, default_flow_style=False, allow_unicode=True)


def yaml_download(request: HttpRequest, *, raw: Any, filename: str) -> HttpResponse | None:
    """With `?download=yaml`, the object's YAML as a file; otherwise None (render the page)."""
    if request.GET.get("download") != "yaml":
        return None
    response = HttpResponse(object_yaml(raw), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.yaml"'
    return response


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


def given_filters(request: HttpRequest) -> QueryDict:
    """The query without empty values: a form's blank box or "any" choice means no filter."""
    query = QueryDict(mutable=True)
    for key, values in request.GET.lists():
        kept = [value for value in values if value.strip()]
        if kept:
            query.setlist(key, kept)
    return query


def apply_filters(
    request: HttpRequest, filterset_class: type[Any], queryset: QuerySet[Any]
) -> tuple[QuerySet[Any], dict[str, str], list[str]]:
    """Filter `queryset` with the shared FilterSet; bad parameters show errors and no rows.

    Returns the rows, the raw parameter values for the form, and error messages that name
    the parameter.
    """
    filterset = filterset_class(given_filters(request), queryset=queryset, request=request)
    params = {name: request.GET.get(name, "").strip() for name in filterset.filters}
    if filterset.is_valid():
        try:
            return filterset.qs, params, []
        except ValidationError as exc:
            # Filters that look a value up (a class that does not exist) fail while filtering.
            failed = exc
    else:
        failed = ValidationError(filterset.errors)
    errors = [
        f"{field}: {message}"
        for field, messages in failed.message_dict.items()
        for message in messages
    ]
    return queryset.none(), params, errors


def apply_ordering(
    request: HttpRequest, items: QuerySet[Any], columns: Mapping[str, str]
) -> tuple[QuerySet[Any], list[str]]:
    """Sort by `?ordering=<column>` or `-<column>` (descending); `columns` maps the column names
    a page offers to the fields they sort by. Anything else is an error naming the parameter."""
    wanted = request.GET.get("ordering", "").strip()
    if not wanted:
        return items, []
    column = wanted.removeprefix("-")
    if column not in columns:
        offered = ", ".join(sorted(columns)) or "none"
        return items.none(), [f"ordering: cannot sort by {wanted!r}; columns: {offered}"]
    field = columns[column]
    # pk last: rows with equal values keep one order from page to page.
    return items.order_by(f"-{field}" if wanted.startswith("-") else field, "pk"), []


def distinct_values(model: type[Model], field: str) -> list[str]:
    """The distinct values of one column, sorted: the choices of a list page's filter."""
    return list(model.objects.order_by(field).values_list(field, flat=True).distinct())


def list_page(
    request: HttpRequest,
    *,
    filterset: type[Any],
    queryset: QuerySet[Any],
    template: str,
    fragment: str,
    live: Iterable[str],
    rows: Callable[[Sequence[Any]], list[Any]] | None = None,
    context: Mapping[str, Any] | None = None,
    ordering: Mapping[str, str] | None = None,
) -> HttpResponse:
    """The skeleton of a filtered, paginated list page with one live `table` fragment.

    `rows` turns the page's objects into what the table iterates (`rows` in the context);
    `context` adds the page's own values (filter choices, tab counts); `ordering` names the
    sortable columns (see `apply_ordering`).
    """
    items, params, errors = apply_filters(request, filterset, queryset)
    if not errors:
        items, errors = apply_ordering(request, items, ordering or {})
    page = paginate(request, items)
    values: dict[str, Any] = {"page_obj": page, "params": params, "errors": errors}
    if rows is not None:
        values["rows"] = rows(list(page.object_list))
    values.update(context or {})
    return render_page(
        request, template=template, context=values, fragments={"table": fragment}, live=live
    )
