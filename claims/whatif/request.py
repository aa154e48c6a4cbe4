"""One what-if request, whichever door it comes in by: the REST API, the what-if page or a job.

A request is a mapping of `REQUEST_KEYS`, spelled as the API spells them. Every door builds one
with `read_request` and answers it with `run_request`:

- the API: its JSON object (or `{"yaml": text}` for a raw YAML body, `read_input`), options
  also from the query string;
- the what-if page: the input it picked (upload, text box or stored template), options from its
  form fields, which carry the same names;
- a job: the request the API checked (`check_request`) and queued (`claims.whatif.jobs`).

Options given as text (a query string, a form) are strings; `assume` and `features` are then
read as one YAML or JSON value. The what-if text, an upload or a raw body, and such an option
are each bounded by `INPUT_LIMITS` (512 KiB): one limit, whichever the door. Bad input is a
`WhatIfError` naming the field, the same from every door: a 400 body for the API, `field:
detail` on the page, the `error` of a failed job. Input too complex to even parse
(`RecursionError`, `MemoryError`) becomes a WhatIfError too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from claims.whatif.engine import Progress
from claims.whatif.inputs import DEFAULT_NAMESPACE, INPUT_LIMITS, JSON, WhatIfError
from claims.whatif.options import NODES_LIMIT_DEFAULT, REQUEST_KEYS
from claims.whatif.service import check_question, what_if
from dralib.kube.documents import DocumentError, decode, load_documents
from inventory.visibility import Visibility, hide_other_namespaces

__all__ = [
    "REQUEST_KEYS",
    "answer_as_seen",
    "check_namespaces",
    "check_request",
    "read_input",
    "read_request",
    "read_text_option",
    "run_request",
]

# Options whose value is structured: given as text, they are read as YAML or JSON.
_STRUCTURED = frozenset({"assume", "features"})


class Readable(Protocol):
    def read(self, size: int = -1, /) -> Any: ...


def read_input(stream: Readable) -> str:
    """The what-if text from a raw body or an uploaded file: UTF-8 within INPUT_LIMITS.

    One byte past the limit is enough to refuse; invalid UTF-8 is refused, never replaced.
    """
    data = stream.read(INPUT_LIMITS.max_bytes + 1)
    try:
        return decode(data, limits=INPUT_LIMITS)
    except DocumentError as exc:
        raise WhatIfError("yaml", str(exc)) from exc


def read_text_option(text: str, *, field: str) -> Any:
    """One YAML or JSON value given as text (a query parameter, a form field)."""
    try:
        documents = list(load_documents(text, limits=INPUT_LIMITS))
    except DocumentError as exc:
        raise WhatIfError(field, str(exc)) from exc
    if len(documents) != 1:
        raise WhatIfError(field, "expected one YAML or JSON value")
    return documents[0].value


def read_request(body: Any, *, options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The request: `body` (a mapping of REQUEST_KEYS) completed by text `options`.

    A key the body leaves out (or null) is taken from `options` when given there and not blank;
    other keys of `options` are not the request's (a form's buttons, a query's paging). The
    input (`yaml`) is required.
    """
    if not isinstance(body, Mapping):
        raise WhatIfError("body", "expected a JSON object or YAML text")
    unknown = sorted(str(key) for key in set(body) - set(REQUEST_KEYS))
    if unknown:
        raise WhatIfError(unknown[0], f"unknown field; expected {', '.join(REQUEST_KEYS)}")
    request = {key: body.get(key) for key in REQUEST_KEYS}
    for key in REQUEST_KEYS:
        text = (options or {}).get(key)
        if request[key] is not None or not isinstance(text, str) or not text.strip():
            continue
        if key in _STRUCTURED:
            request[key] = read_text_option(text, field=key)
        else:
            # Surrounding blanks of a typed name or number are not part of it; the input's are.
            request[key] = text if key == "yaml" else text.strip()
    if request["yaml"] in (None, ""):
        raise WhatIfError("yaml", "required: the claim, template or pod to try")
    return request


def _question(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's fields as `what_if` keyword arguments (besides the input text)."""
    return {
        "nodes": request.get("nodes"),
        "node_selector": request.get("nodeSelector"),
        "count": request["count"] if request.get("count") is not None else 1,
        "assume": request.get("assume"),
        "features": request.get("features"),
        "namespace": request.get("namespace"),
        "gang": request.get("gang"),
        "preemption": request.get("preemption"),
        "nodes_offset": request.get("nodesOffset"),
        # Every door answers a window of nodes unless asked for more: an answer's size then
        # does not grow with the cluster.
        "nodes_limit": (
            request["nodesLimit"] if request.get("nodesLimit") is not None else NODES_LIMIT_DEFAULT
        ),
    }


def run_request(
    request: Mapping[str, Any], *, progress: Progress | None = None, budget: float | None = None
) -> JSON:
    """Answer one request within `budget` seconds of search; bad input raises WhatIfError."""
    try:
        return what_if(request.get("yaml"), **_question(request), progress=progress, budget=budget)
    except (RecursionError, MemoryError) as exc:
        raise WhatIfError("yaml", f"input too complex: {type(exc).__name__}") from exc


def check_request(request: Mapping[str, Any]) -> None:
    """Refuse a request `run_request` would refuse for its input, before any search runs."""
    try:
        check_question(request.get("yaml"), **_question(request))
    except (RecursionError, MemoryError) as exc:
        raise WhatIfError("yaml", f"input too complex: {type(exc).__name__}") from exc


def _document_namespaces(value: Any, depth: int = 0) -> Iterator[str | None]:
    """metadata.namespace of each object of a document (None when it names none), lists'
    items included."""
    if depth > 8 or not isinstance(value, Mapping):
        return
    items = value.get("items")
    if isinstance(items, list):
        for item in items:
            yield from _document_namespaces(item, depth + 1)
        return
    metadata = value.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    yield str(namespace) if namespace else None


def _assumed_namespaces(request: Mapping[str, Any]) -> set[str]:
    assume = request.get("assume")
    found = set()
    for op in assume if isinstance(assume, list) else []:
        if isinstance(op, Mapping):
            for key in ("claim", "pod"):
                namespace, slash, _ = str(op.get(key) or "").partition("/")
                if slash:
                    found.add(namespace)
    return found


def _refuse_hidden(asked: set[str], seen: Visibility) -> None:
    hidden = sorted(ns for ns in asked if not seen.allows(ns))
    if hidden:
        # Naming the person's own namespaces says nothing of anyone else's.
        yours = ", ".join(sorted(seen.namespaces)) or "none"
        raise WhatIfError(
            "namespace",
            f"namespace {hidden[0]!r} is not one you may list pods and claims in (yours: {yours})",
        )


def check_namespaces(request: Mapping[str, Any], seen: Visibility) -> None:
    """Refuse, before anything runs, a question in a namespace the person may not see: the
    objects it names, its default namespace when one of them names none, its assumptions.
    Refused the same whatever that namespace holds, so nothing is learnt of it."""
    if seen.everything:
        return
    text = request.get("yaml")
    try:
        documents = (
            [d.value for d in load_documents(text, limits=INPUT_LIMITS)]
            if isinstance(text, str)
            else [text]
        )
    except DocumentError:
        return  # the request path reports bad input itself
    named = [ns for doc in documents for ns in _document_namespaces(doc)]
    asked = {ns for ns in named if ns} | _assumed_namespaces(request)
    if not named or None in named:
        asked.add(str(request.get("namespace") or DEFAULT_NAMESPACE))
    _refuse_hidden(asked, seen)


def question_namespaces(answer: Mapping[str, Any], request: Mapping[str, Any]) -> set[str]:
    """The namespaces a question lives in: its default namespace, its claims' and the
    namespaces of the existing claims its assumptions name."""
    found = {str(answer.get("namespace") or "")}
    for entry in answer.get("claims") or []:
        if isinstance(entry, Mapping):
            found.add(str(entry.get("claim") or "").partition("/")[0])
    return (found | _assumed_namespaces(request)) - {""}


def answer_as_seen(answer: JSON, request: Mapping[str, Any], seen: Visibility) -> JSON:
    """The answer as a person who sees `seen` may read it. A question in a namespace they may
    not see is refused (its quota and claims are that namespace's), the same whatever that
    namespace holds; other namespaces' claims and pods in the answer are named by place only."""
    _refuse_hidden(question_namespaces(answer, request), seen)
    return hide_other_namespaces(answer, seen)
