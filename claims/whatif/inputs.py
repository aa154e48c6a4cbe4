"""What-if input: YAML or JSON text (or parsed objects) turned into documents, and claim checks.

`load_documents` reads the text (several documents, `kind: List`); `_normalize` brings one object
to the v1 shape; `_check_claim` makes the API server's checks of a claim to create. Turning the
documents into pods and claims is `claims.whatif.pods`. Every problem becomes a `WhatIfError`
naming the document and field.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dralib.allocator.cel import MAX_EXPRESSION_LENGTH, CELError, CELOptions, compile_selector
from dralib.kube.documents import DocumentError, Limits, check_value, list_items
from dralib.kube.documents import load_documents as parse_documents
from dralib.kube.normalize import NormalizeError, normalize

JSON = dict[str, Any]

MAX_TEXT_BYTES = 512 * 1024
MAX_DOCUMENTS = 64
# What a pasted manifest may cost to parse; see dralib.kube.documents.
INPUT_LIMITS = Limits(max_bytes=MAX_TEXT_BYTES, max_documents=MAX_DOCUMENTS, max_nodes=200_000)
MAX_CLAIMS = 32
MAX_REQUESTS_PER_CLAIM = 32
DEFAULT_NAMESPACE = "default"


class WhatIfError(ValueError):
    """Bad what-if input; `field` says where (`yaml: document 1: spec.devices...`, `count`)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)

    def as_dict(self) -> JSON:
        """The 400 body: {"field": ..., "detail": ...}."""
        return {"field": self.field, "detail": self.message}


@dataclass
class InputClaim:
    """One claim of the input: a v1 ResourceClaim object and where it came from."""

    obj: JSON
    source: str
    # A claim that already exists in the cluster (a pod's resourceClaimName): shared by copies,
    # not counted by quota again, and possibly already allocated.
    existing: bool = False
    classic: bool = False

    @property
    def ref(self) -> str:
        meta = self.obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# Looks up a stored object: (kind, namespace, name) -> normalized object or None.
Lookup = Callable[[str, str, str], JSON | None]


def load_documents(source: Any) -> list[Any]:
    """Text (YAML or JSON, several documents allowed) or already parsed objects -> documents."""
    if isinstance(source, bytes | str):
        if not (source.strip() if isinstance(source, str) else source.strip()):
            raise WhatIfError("yaml", "no input: paste a ResourceClaim, template or Pod")
        try:
            documents = [d.value for d in parse_documents(source, limits=INPUT_LIMITS)]
        except DocumentError as exc:
            raise WhatIfError("yaml", str(exc)) from exc
    elif isinstance(source, Mapping | Sequence):
        documents = [source] if isinstance(source, Mapping) else list(source)
        try:
            check_value(documents, limits=INPUT_LIMITS)
        except DocumentError as exc:
            raise WhatIfError("yaml", str(exc)) from exc
    else:
        raise WhatIfError("yaml", f"expected YAML text or objects, got {type(source).__name__}")
    expanded: list[Any] = []
    for document in documents:
        try:
            expanded.extend(item for _, item in list_items(document))
        except DocumentError as exc:
            raise WhatIfError("yaml", f"a List needs items: {exc}") from exc
    if not expanded:
        raise WhatIfError("yaml", "no input: paste a ResourceClaim, template or Pod")
    if len(expanded) > MAX_DOCUMENTS:
        raise WhatIfError("yaml", f"at most {MAX_DOCUMENTS} documents")
    return expanded


def _normalize(document: Mapping[str, Any], *, where: str, namespace: str) -> JSON:
    """Normalize with defaults a user leaves out (uid, namespace), naming the field on error."""

    obj = copy.deepcopy(dict(document))
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if isinstance(meta, dict):
        # What-if objects are not stored: a missing uid or namespace is not the user's mistake.
        meta.setdefault("uid", f"whatif-{uuid.uuid4()}")
        if obj.get("kind") in {"ResourceClaim", "ResourceClaimTemplate", "Pod"}:
            meta.setdefault("namespace", namespace)
        if obj.get("kind") != "Pod" or meta.get("name") or meta.get("generateName"):
            meta.setdefault("name", str(meta.get("generateName") or "what-if").rstrip("-"))
        else:
            meta.setdefault("name", "what-if")
    try:
        return normalize(obj, validate=True)
    except NormalizeError as exc:
        raise WhatIfError(f"{where}: {exc.field}" if exc.field else where, exc.reason) from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise WhatIfError(where, str(exc)) from exc


def _claim_from_template(template: JSON, *, name: str, namespace: str) -> JSON:
    spec = template.get("spec") or {}
    meta = dict(spec.get("metadata") or {})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            **{k: v for k, v in meta.items() if k in {"labels", "annotations"}},
            "name": name,
            "namespace": namespace,
            "uid": f"whatif-{uuid.uuid4()}",
        },
        "spec": copy.deepcopy(spec.get("spec") or {}),
        **({"classic": copy.deepcopy(template["classic"])} if "classic" in template else {}),
    }


_FIELD_IN_MESSAGE = re.compile(r"(spec\.devices[\w.\[\]/-]*)")


def _check_claim(claim: InputClaim) -> None:
    """Checks the API server would make at creation: request count and CEL selectors."""
    devices = (claim.obj.get("spec") or {}).get("devices") or {}
    requests = devices.get("requests") or []
    where = claim.source
    if len(requests) > MAX_REQUESTS_PER_CLAIM:
        raise WhatIfError(
            f"{where}: spec.devices.requests", f"at most {MAX_REQUESTS_PER_CLAIM} requests"
        )
    for r_index, request in enumerate(requests):
        views: list[tuple[str, Any]] = []
        if request.get("exactly") is not None:
            views.append((f"spec.devices.requests[{r_index}].exactly", request["exactly"]))
        for s_index, sub in enumerate(request.get("firstAvailable") or []):
            views.append((f"spec.devices.requests[{r_index}].firstAvailable[{s_index}]", sub))
        for path, view in views:
            for x_index, selector in enumerate((view or {}).get("selectors") or []):
                expression = (selector.get("cel") or {}).get("expression")
                field_path = f"{where}: {path}.selectors[{x_index}].cel.expression"
                check_cel(expression, field_path=field_path)


def check_cel(expression: Any, *, field_path: str) -> None:
    """Compile a selector as the API server would; hostile or invalid ones are a WhatIfError."""
    if not isinstance(expression, str) or not expression.strip():
        raise WhatIfError(field_path, "a CEL expression is required")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise WhatIfError(
            field_path,
            f"expression is {len(expression)} characters, the limit is {MAX_EXPRESSION_LENGTH}",
        )
    try:
        compile_selector(expression, options=CELOptions())
    except CELError as exc:
        raise WhatIfError(field_path, str(exc)) from exc
    except RecursionError as exc:
        raise WhatIfError(field_path, "expression is nested too deeply") from exc


def field_of_allocation_error(message: str, claims: Sequence[InputClaim]) -> str:
    """Best guess at the field an allocator error names, prefixed by the claim's document."""
    match = _FIELD_IN_MESSAGE.search(message)
    for claim in claims:
        name = (claim.obj.get("metadata") or {}).get("name")
        if name and str(name) in message:
            return f"{claim.source}: {match.group(1)}" if match else claim.source
    return match.group(1) if match else "yaml"
