"""One what-if request (the HTTP body or a job's payload) mapped onto `what_if`, errors included.

The REST view and the Celery job both call `run_request`; input too complex to even parse
(`RecursionError`, `MemoryError`) becomes the same `WhatIfError` for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claims.whatif.engine import Progress
from claims.whatif.inputs import JSON, WhatIfError
from claims.whatif.options import REQUEST_KEYS
from claims.whatif.service import check_question, what_if

__all__ = ["REQUEST_KEYS", "check_request", "run_request"]


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
