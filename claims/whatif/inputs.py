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

import yaml

from claims.allocator.cel import MAX_EXPRESSION_LENGTH, CELError, CELOptions, compile_selector
from inventory.kube.normalize import NormalizeError, normalize

JSON = dict[str, Any]

MAX_TEXT_BYTES = 512 * 1024
MAX_DOCUMENTS = 64
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
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WhatIfError("yaml", f"not UTF-8 text: {exc}") from exc
    if isinstance(source, str):
        if len(source.encode("utf-8", "replace")) > MAX_TEXT_BYTES:
            raise WhatIfError("yaml", f"input is larger than {MAX_TEXT_BYTES // 1024} KiB")
        if not source.strip():
            raise WhatIfError("yaml", "no input: paste a ResourceClaim, template or Pod")
        try:
            documents = [d for d in yaml.safe_load_all(source) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise WhatIfError("yaml", f"invalid YAML{where}: {problem}") from exc
        except RecursionError as exc:
            raise WhatIfError("yaml", "invalid YAML: nested too deeply") from exc
    elif isinstance(source, Mapping):
        documents = [source]
    elif isinstance(source, Sequence):
        documents = list(source)
    else:
        raise WhatIfError("yaml", f"expected YAML text or objects, got {type(source).__name__}")
    expanded: list[Any] = []
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List":
            items = document.get("items")
            if not isinstance(items, list):
                raise WhatIfError("yaml", "a List needs items")
            expanded.extend(items)
        else:
            expanded.append(document)
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
        return normalize(obj)
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
