"""What a detail page answers for an object that is not in the cluster, and old id links.

Detail URLs carry Kubernetes names, so a link outlives the database row it was made from: a
replaced node's pool is a new row under the same name. A name that matches nothing answers 404
with a page that names what was asked for; the dashboard records no deletion times, so it
cannot say when the object went (an open page that sees it go says so, see live.js).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import render


def not_found(
    request: HttpRequest,
    *,
    kind: str,
    name: str,
    listing: str,
    parent: tuple[str, str] | None = None,
) -> HttpResponse:
    """A 404 page naming the missing object (`kind` `name`), with its list page (`listing`, a
    URL) and, when the object's parent still exists, a link to it (`parent`: label, URL)."""
    context = {"kind": kind, "name": name, "listing": listing, "parent": parent}
    return render(request, "claims/missing.html", context, status=404)


def moved_to(request: HttpRequest, url: str) -> HttpResponsePermanentRedirect:
    """A permanent redirect to `url` keeping the query (`?fragment=`, `?download=`): a row id
    always named the same object, so the answer never changes."""
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)
