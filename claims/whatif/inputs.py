"""What-if input: YAML or JSON text (or parsed objects) turned into v1 claims to allocate.

Accepted documents, in any API version `inventory.kube.normalize` supports: ResourceClaim,
ResourceClaimTemplate, Pod, a workload with a pod template (Deployment, Job, StatefulSet, ...,
CronJob), a bare claim spec (`{"devices": ...}`) and `kind: List`. A pod's `resourceClaims` name
templates (looked up among the documents first, then in the database) or existing claims. Every
problem becomes a `WhatIfError` naming the document and field.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.allocator.cel import MAX_EXPRESSION_LENGTH, CELError, CELOptions, compile_selector
from inventory.kube.documents import DocumentError, Limits, check_value, list_items
from inventory.kube.documents import load_documents as parse_documents

JSON = dict[str, Any]

MAX_TEXT_BYTES = 512 * 1024
MAX_DOCUMENTS = 64
# What a pasted manifest may cost to parse; see inventory.kube.documents.
INPUT_LIMITS = Limits(max_bytes=MAX_TEXT_BYTES, max_documents=MAX_DOCUMENTS, max_nodes=200_000)
MAX_CLAIMS = 32
MAX_REQUESTS_PER_CLAIM = 32
DEFAULT_NAMESPACE = "default"

# Workloads whose pod template sits at spec.template (or spec.jobTemplate.spec.template).
_WORKLOAD_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController"}
)


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


@dataclass
class ParsedInput:
    """The claims of a what-if request and the pod tolerations that decide schedulable nodes."""

    claims: list[InputClaim] = field(default_factory=list)
    namespace: str = DEFAULT_NAMESPACE
    tolerations: list[JSON] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    @property
    def simulated(self) -> list[InputClaim]:
        return [c for c in self.claims if not c.classic]

    @property
    def classic(self) -> list[InputClaim]:
        return [c for c in self.claims if c.classic]


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
    from inventory.kube.normalize import NormalizeError, normalize

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


def _pod_from_workload(document: Mapping[str, Any], *, where: str) -> JSON:
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        raise WhatIfError(f"{where}: spec", "required field missing")
    if document.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        template_path = "spec.jobTemplate.spec.template"
    else:
        template_path = "spec.template"
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise WhatIfError(f"{where}: {template_path}", "a pod template is required")
    meta = document.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": str(meta.get("name") or "what-if"),
            **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
        },
        "spec": copy.deepcopy(dict(template["spec"])),
    }


def _document_kind(document: Any, *, where: str) -> str:
    if not isinstance(document, Mapping):
        raise WhatIfError(where, f"expected an object, got {type(document).__name__}")
    kind = document.get("kind")
    if kind is None and isinstance(document.get("devices"), Mapping):
        return "ClaimSpec"
    if not isinstance(kind, str) or not kind:
        raise WhatIfError(f"{where}: kind", "required field missing")
    return kind


def parse_input(source: Any, *, namespace: str | None, lookup: Lookup | None = None) -> ParsedInput:
    """Documents -> claims to allocate, in document order (pod claims in the pod's order)."""
    documents = load_documents(source)
    ns_default = namespace or DEFAULT_NAMESPACE
    parsed = ParsedInput(namespace=ns_default)
    templates: dict[tuple[str, str], JSON] = {}
    claims: dict[tuple[str, str], JSON] = {}
    normalized: list[tuple[str, str, JSON]] = []
    for index, document in enumerate(documents):
        where = f"yaml: document {index + 1}"
        kind = _document_kind(document, where=where)
        parsed.kinds.append(kind)
        if kind == "ClaimSpec":
            document = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "what-if"},
                "spec": document,
            }
            kind = "ResourceClaim"
        elif kind in _WORKLOAD_KINDS or kind == "CronJob":
            document = _pod_from_workload(document, where=where)
            kind = "Pod"
        elif kind not in {"ResourceClaim", "ResourceClaimTemplate", "Pod"}:
            raise WhatIfError(
                f"{where}: kind",
                f"{kind} is not a ResourceClaim, ResourceClaimTemplate, Pod or workload",
            )
        obj = _normalize(document, where=where, namespace=ns_default)
        meta = obj["metadata"]
        key = (str(meta.get("namespace") or ns_default), str(meta["name"]))
        if kind == "ResourceClaimTemplate":
            templates[key] = obj
        elif kind == "ResourceClaim":
            claims[key] = obj
        normalized.append((where, kind, obj))
    if namespace is None:
        first = normalized[0][2]["metadata"].get("namespace")
        parsed.namespace = str(first or ns_default)
    has_pod = any(kind == "Pod" for _, kind, _ in normalized)
    for where, kind, obj in normalized:
        meta = obj["metadata"]
        ns = str(meta.get("namespace") or ns_default)
        if kind == "Pod":
            _add_pod_claims(
                parsed, obj, where=where, templates=templates, claims=claims, lookup=lookup
            )
        elif kind == "ResourceClaim" and not has_pod:
            parsed.claims.append(InputClaim(obj=obj, source=where, classic="classic" in obj))
        elif kind == "ResourceClaimTemplate" and not has_pod:
            claim = _claim_from_template(obj, name=f"{meta['name']}-what-if", namespace=ns)
            parsed.claims.append(InputClaim(obj=claim, source=where, classic="classic" in obj))
    if not parsed.claims:
        raise WhatIfError("yaml", "the input asks for no ResourceClaim")
    if len(parsed.claims) > MAX_CLAIMS:
        raise WhatIfError("yaml", f"at most {MAX_CLAIMS} claims in one what-if")
    for claim in parsed.simulated:
        _check_claim(claim)
    return parsed


def _add_pod_claims(
    parsed: ParsedInput,
    pod: JSON,
    *,
    where: str,
    templates: Mapping[tuple[str, str], JSON],
    claims: Mapping[tuple[str, str], JSON],
    lookup: Lookup | None,
) -> None:
    meta = pod["metadata"]
    ns = str(meta.get("namespace") or parsed.namespace)
    spec = pod.get("spec") or {}
    parsed.tolerations.extend(spec.get("tolerations") or [])
    entries = spec.get("resourceClaims") or []
    if not entries:
        raise WhatIfError(f"{where}: spec.resourceClaims", "the pod uses no ResourceClaim")
    for index, entry in enumerate(entries):
        path = f"{where}: spec.resourceClaims[{index}]"
        template_name = entry.get("resourceClaimTemplateName")
        claim_name = entry.get("resourceClaimName")
        if template_name:
            template = templates.get((ns, template_name))
            if template is None and lookup is not None:
                template = lookup("ResourceClaimTemplate", ns, template_name)
            if template is None:
                raise WhatIfError(
                    f"{path}.resourceClaimTemplateName",
                    f"ResourceClaimTemplate {ns}/{template_name} not found",
                )
            claim = _claim_from_template(
                template, name=f"{meta['name']}-{entry['name']}", namespace=ns
            )
            parsed.claims.append(InputClaim(obj=claim, source=path, classic="classic" in claim))
        elif claim_name:
            existing = False
            found = claims.get((ns, claim_name))
            if found is None and lookup is not None:
                found = lookup("ResourceClaim", ns, claim_name)
                existing = found is not None
            if found is None:
                raise WhatIfError(
                    f"{path}.resourceClaimName", f"ResourceClaim {ns}/{claim_name} not found"
                )
            parsed.claims.append(
                InputClaim(obj=found, source=path, existing=existing, classic="classic" in found)
            )
        else:
            raise WhatIfError(path, "needs resourceClaimName or resourceClaimTemplateName")


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
