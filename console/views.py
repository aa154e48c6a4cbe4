"""Console pages: the overview, the sync status and the what-if form."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse

from claims.models import ResourceClaimTemplate
from claims.pages import shape_what_if
from claims.whatif.options import MAX_COUNT
from claims.whatif.service import what_if as simulate
from console.overview import overview_context
from dashboard.views import paginate, read_access, render_page
from dralib.kube.documents import DocumentError, load_documents
from inventory.models import SkippedObject, SyncState


@read_access
def overview(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        template="console/overview.html",
        context=overview_context(),
        fragments={"body": "console/_overview_body.html"},
        live=["overview"],
    )


@read_access
def sync_status(request: HttpRequest) -> HttpResponse:
    from django.utils import timezone

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
        template="console/sync_status.html",
        context=context,
        fragments={"body": "console/_sync_body.html"},
        live=["sync"],
    )


class WhatIfInputError(ValueError):
    """The what-if form's input cannot be read; the message names the field."""


MAX_WHAT_IF_BYTES = 256 * 1024


def read_claim_input(*, text: str, upload: Any = None, template: str = "") -> tuple[Any, str]:
    """What to simulate (YAML text or a stored object) and a label saying where it came from.

    An uploaded file wins over the text box, which wins over a picked template
    (`namespace/name` of a stored ResourceClaimTemplate). The what-if service parses the text
    (ResourceClaims, a template, a Pod or workload, several documents) and names bad fields.
    """

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


WHAT_IF_FIELDS = ("yaml", "template", "count", "node", "node_selector", "namespace", "assume")


def read_assume(text: str) -> list[Any] | None:
    """The `assume` box: a YAML or JSON list of changes (one change alone is a list of one)."""
    if not text.strip():
        return None
    try:
        documents = list(load_documents(text, source="assume"))
    except DocumentError as exc:
        raise WhatIfInputError(f"assume: {exc}") from None
    if len(documents) != 1:
        raise WhatIfInputError("assume: expected one YAML or JSON list of changes")
    value = documents[0].value
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise WhatIfInputError("assume: expected a list of changes like {op: remove-node, ...}")
    return value


# A result link carries the claim text in its query; longer texts get no link.
MAX_SHARED_YAML = 8 * 1024


@read_access
def what_if(request: HttpRequest) -> HttpResponse:
    """The what-if form; a POST runs it, and so does a GET carrying the form (a shared link)."""

    form = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {
        "templates": list(
            ResourceClaimTemplate.objects.order_by("namespace", "name").values_list(
                "namespace", "name"
            )
        ),
        "max_count": MAX_COUNT,
        "values": {name: form.get(name, "1" if name == "count" else "") for name in WHAT_IF_FIELDS},
        "error": "",
        "result": None,
    }
    shared = request.method == "GET" and bool(
        request.GET.get("yaml", "").strip() or request.GET.get("run")
    )
    if request.method == "POST" or shared:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        context.update(run_what_if(request, form))
    return render_page(
        request,
        template="console/what_if.html",
        context=context,
        fragments={"result": "console/_whatif_result.html"},
    )


def share_url(values: dict[str, str]) -> str:
    """The what-if page URL whose GET re-runs this form, or "" when the claim is too long."""
    if len(values.get("yaml", "")) + len(values.get("assume", "")) > MAX_SHARED_YAML:
        return ""
    query = QueryDict(mutable=True)
    for name in WHAT_IF_FIELDS:
        value = values.get(name, "") if name in ("yaml", "assume") else values.get(name, "").strip()
        if value and not (name == "count" and value == "1"):
            query[name] = value
    query["run"] = "1"
    return f"{reverse('what-if')}?{query.urlencode()}"


def run_what_if(request: HttpRequest, form: QueryDict) -> dict[str, Any]:
    """Read the form, ask claims.whatif.service.what_if, and shape its answer for the templates."""

    upload = request.FILES.get("file") if request.method == "POST" else None
    try:
        source, label = read_claim_input(
            text=form.get("yaml", ""),
            upload=upload,
            template=form.get("template", ""),
        )
        answer = simulate(
            source,
            count=form.get("count", "").strip() or 1,
            node=form.get("node", "").strip() or None,
            node_selector=form.get("node_selector", "").strip() or None,
            namespace=form.get("namespace", "").strip() or None,
            assume=read_assume(form.get("assume", "")),
            budget=settings.WHATIF_BUDGET_SECONDS,
        )
    except ValueError as exc:  # WhatIfError is a ValueError naming the field
        return {"error": str(exc)}
    values = {name: form.get(name, "") for name in WHAT_IF_FIELDS}
    if upload is not None and isinstance(source, str):
        values["yaml"] = source
    return {"result": shape_what_if(answer), "source": label, "share_url": share_url(values)}
