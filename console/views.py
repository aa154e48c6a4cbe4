"""Console pages: the overview, the sync status and the what-if form."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from claims.models import ResourceClaimTemplate
from claims.pages import shape_what_if
from claims.whatif.inputs import WhatIfError
from claims.whatif.options import MAX_COUNT
from claims.whatif.request import (
    answer_as_seen,
    check_namespaces,
    read_input,
    read_request,
    run_request,
)
from claims.whatif.shared import keep_answer, may_see, shared_answer
from console.overview import overview_context
from dashboard.views import paginate, read_access, render_page
from inventory.freshness import cluster_freshness
from inventory.models import SkippedObject, SyncState
from inventory.visibility import (
    EVERYTHING,
    Visibility,
    hide_other_namespaces,
    scope_namespaced,
    visibility_for,
)


@read_access
def overview(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        template="console/overview.html",
        context=overview_context(visibility_for(request)),
        fragments={"body": "console/_overview_body.html"},
        live=["overview"],
    )


@read_access
def sync_status(request: HttpRequest) -> HttpResponse:
    from django.utils import timezone

    kind = request.GET.get("kind", "").strip()
    text = request.GET.get("q", "").strip()
    skipped = scope_namespaced(
        SkippedObject.objects.all(), visibility_for(request), cluster_scoped=True
    )
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
        "freshness": cluster_freshness(),
    }
    return render_page(
        request,
        template="console/sync_status.html",
        context=context,
        fragments={"body": "console/_sync_body.html"},
        live=["sync"],
    )


@never_cache
@require_safe
@read_access
def freshness(request: HttpRequest) -> JsonResponse:
    """The cluster's freshness as JSON: what the header badge and banner show (polled)."""
    return JsonResponse(cluster_freshness().as_dict())


# Form fields, named as the API's request keys (the page's form is the API's query string);
# `file` (an upload) is read as well.
WHAT_IF_FIELDS = (
    "yaml",
    "template",
    "count",
    "nodes",
    "nodeSelector",
    "namespace",
    "assume",
    "preemption",
    # The window of nodes shown: the pager's buttons set the offset.
    "nodesOffset",
    "nodesLimit",
)
# Older names of form fields, still read from result links made before the rename.
_RENAMED_FIELDS = {"nodes": "node", "nodeSelector": "node_selector"}


def form_values(form: QueryDict) -> dict[str, str]:
    """The form's fields as typed (blank when absent; `count` defaults to 1)."""
    values = {}
    for name in WHAT_IF_FIELDS:
        value = form.get(name) or form.get(_RENAMED_FIELDS.get(name, ""), "")
        values[name] = value or ("1" if name == "count" else "")
    return values


def read_claim_input(
    *, text: str, upload: Any = None, template: str = "", seen: Visibility = EVERYTHING
) -> tuple[Any, str]:
    """What to simulate (YAML text or a stored object) and a label saying where it came from.

    An uploaded file wins over the text box, which wins over a picked template
    (`namespace/name` of a stored ResourceClaimTemplate). Nothing given is (None, ""): the
    request then lacks its input, which `read_request` reports as the API does. The what-if
    service parses the text (ResourceClaims, a template, a Pod or workload, several documents)
    and names bad fields.
    """
    if upload is not None:
        return read_input(upload), f"file {upload.name}"
    if text.strip():
        return text, "pasted YAML"
    if template:
        namespace, _, name = template.partition("/")
        row = ResourceClaimTemplate.objects.filter(namespace=namespace, name=name).first()
        # Another namespace's template is refused as one that does not exist.
        if row is None or not seen.allows(namespace):
            raise WhatIfError("template", f"no ResourceClaimTemplate {template!r}")
        return dict(row.obj), f"ResourceClaimTemplate {template}"
    return None, ""


def _visible_templates(request: HttpRequest) -> list[tuple[str, str]]:
    """(namespace, name) of the claim templates the what-if form offers this person."""
    return list(
        scope_namespaced(
            ResourceClaimTemplate.objects.order_by("namespace", "name"), visibility_for(request)
        ).values_list("namespace", "name")
    )


@read_access
def what_if(request: HttpRequest) -> HttpResponse:
    """The what-if form; a POST runs it.

    A GET, a shared link's too, only fills the form in: running a what-if spends the server's
    time in the asker's name, so it takes a POST, which Django's CSRF check guards, and another
    site cannot make a signed-in browser run one by linking to it or loading it in an image.
    """

    form = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {
        "templates": _visible_templates(request),
        "max_count": MAX_COUNT,
        "values": form_values(form),
        "error": "",
        "result": None,
        # Opened from a result link: the form is filled in and waits for Run.
        "shared": request.method == "GET" and bool(request.GET.get("yaml", "").strip()),
    }
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        context.update(
            run_what_if(
                context["values"],
                upload=request.FILES.get("file"),
                submitter=request.user.get_username(),
                seen=visibility_for(request),
            )
        )
    return render_page(
        request,
        template="console/what_if.html",
        context=context,
        fragments={"result": "console/_whatif_result.html"},
    )


def run_what_if(
    values: dict[str, str],
    *,
    upload: Any = None,
    submitter: str = "",
    seen: Visibility = EVERYTHING,
) -> dict[str, Any]:
    """Answer the form through the API's request path and shape the answer for the templates.

    The picked input is the request's `yaml`; the other fields are its options given as text,
    read by `read_request` as the API reads its query string, and `run_request` answers. The
    answer is kept behind a share link (`claims.whatif.shared`) that shows it as computed.
    """
    try:
        source, label = read_claim_input(
            text=values["yaml"], upload=upload, template=values["template"], seen=seen
        )
        question = read_request({"yaml": source}, options=values)
        check_namespaces(question, seen)
        answer = run_request(question, budget=settings.WHATIF_BUDGET_SECONDS)
        shown = answer_as_seen(answer, question, seen)
    except WhatIfError as exc:
        return {"error": str(exc)}
    if upload is not None and isinstance(source, str):
        values = {**values, "yaml": source}
    kept = keep_answer(answer, values=values, source=label, submitter=submitter)
    return {
        "result": shape_what_if(shown, asked=values.get("count", ""), seen=seen),
        "source": label,
        "share_url": reverse("what-if-shared", args=[kept.token]),
    }


@require_safe
@read_access
def what_if_shared(request: HttpRequest, token: str) -> HttpResponse:
    """A kept what-if answer, as it was computed (its `asOf` and cluster state), with the form
    filled in and "Run again now" (a POST to the what-if page).

    An unknown or expired link and one the person may not see are the same 404: a link's
    existence says nothing to someone who may not read it.
    """
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    shared = shared_answer(token)
    if shared is None or not may_see(request.user, shared):
        raise Http404("no such shared what-if answer (links expire after a week)")
    values = form_values(QueryDict(mutable=True))
    values.update({k: str(v) for k, v in shared.values.items() if k in WHAT_IF_FIELDS})
    context: dict[str, Any] = {
        "templates": _visible_templates(request),
        "max_count": MAX_COUNT,
        "values": values,
        "error": "",
        "result": shape_what_if(
            hide_other_namespaces(shared.answer, visibility_for(request)),
            asked=values["count"],
            with_grids=False,
        ),
        "source": shared.source,
        "kept": shared,
        "share_url": request.path,
        "shared": False,
    }
    return render_page(
        request,
        template="console/what_if.html",
        context=context,
        fragments={"result": "console/_whatif_result.html"},
    )
