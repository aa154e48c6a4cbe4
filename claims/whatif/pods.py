"""What-if documents turned into the pods to place, each with its claims and node filters.

Accepted, in any API version `dralib.kube.normalize` supports: Pods and workloads with a pod
template (expanded by `workloads`), ResourceClaims and ResourceClaimTemplates (looked up among
the documents first, then in the database, when a pod names them), Namespaces (their labels
decide the admin-access check), a bare claim spec (`{"devices": ...}`). Claims and templates
without any pod stand for one pod using all of them. Any other kind is listed in `ignored`,
and every pod is placed, with or without claims (the scheduler's node filters, NodePorts and
NodeResourcesFit among them, apply to all). A pod asking for an extended resource a DeviceClass
backs gets the scheduler's implicit claim (`extended`). Every problem is a `WhatIfError` naming
the document and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.extended import (
    DEVICE_CLASS_PREFIX,
    implicit_claim,
    implicit_requests,
    requested_names,
)
from claims.whatif.inputs import (
    DEFAULT_NAMESPACE,
    JSON,
    MAX_CLAIMS,
    InputClaim,
    Lookup,
    WhatIfError,
    _check_claim,
    _claim_from_template,
    _normalize,
    load_documents,
)
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.podasks import check_quantities
from claims.whatif.workloads import MAX_PODS, WORKLOAD_KINDS, expand_workload
from dralib.kube.normalize.names import dns1123_label

# Claims of one what-if, all pods together (a Deployment's replicas each have their own).
MAX_TOTAL_CLAIMS = 4 * MAX_CLAIMS
_CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
IMPLICIT_POD = "what-if"


@dataclass
class InputPod:
    """One pod of the input: its claims in `spec.resourceClaims` order and its node filters."""

    name: str
    namespace: str
    source: str
    spec: JSON
    claims: list[InputClaim]
    node_filter: NodeFilter
    workload: str = ""
    # A DaemonSet's pod: one copy per node that passes its filters (see engine.expand_daemons).
    per_node: bool = False
    # The input had claims but no pod: this pod stands for "allocate these together".
    implicit: bool = False
    # metadata.labels (what other pods' spread constraints and affinity terms select).
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class ParsedInput:
    """The pods of a what-if request, in document order, and what was left aside."""

    pods: list[InputPod] = field(default_factory=list)
    namespace: str = DEFAULT_NAMESPACE
    kinds: list[str] = field(default_factory=list)
    ignored: list[JSON] = field(default_factory=list)
    # Namespace documents of the input: name -> labels.
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def claims(self) -> list[InputClaim]:
        """Every distinct claim, in the order pods use them (a shared claim counts once)."""
        return distinct_claims(self.pods)

    @property
    def simulated(self) -> list[InputClaim]:
        return [c for c in self.claims if not c.classic]

    @property
    def classic(self) -> list[InputClaim]:
        return [c for c in self.claims if c.classic]


def distinct_claims(pods: Sequence[InputPod]) -> list[InputClaim]:
    """The pods' claims in order, each once: a claim several pods name is one object."""
    seen: dict[int, InputClaim] = {}
    for pod in pods:
        for claim in pod.claims:
            seen.setdefault(id(claim), claim)
    return list(seen.values())


def _document_kind(document: Any, *, where: str) -> str:
    if not isinstance(document, Mapping):
        raise WhatIfError(where, f"expected an object, got {type(document).__name__}")
    kind = document.get("kind")
    if kind is None and isinstance(document.get("devices"), Mapping):
        return "ClaimSpec"
    if not isinstance(kind, str) or not kind:
        raise WhatIfError(f"{where}: kind", "required field missing")
    return kind


def _name_of(document: Mapping[str, Any]) -> str:
    meta = document.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


class _Reader:
    """Documents -> pods; holds the templates and claims the documents define."""

    def __init__(
        self, *, namespace: str, lookup: Lookup | None, extended: Mapping[str, str]
    ) -> None:
        self.namespace = namespace
        self.lookup = lookup
        self.extended = extended
        self.templates: dict[tuple[str, str], JSON] = {}
        self.claims: dict[tuple[str, str], InputClaim] = {}
        self.existing: dict[tuple[str, str], InputClaim] = {}
        self.used: set[tuple[str, str, str]] = set()

    def claim_for(self, entry: Any, *, pod: JSON, path: str) -> InputClaim:
        if not isinstance(entry, Mapping):
            raise WhatIfError(
                path, "expected {name, resourceClaimName or resourceClaimTemplateName}"
            )
        meta = pod["metadata"]
        ns = str(meta.get("namespace") or self.namespace)
        template_name = entry.get("resourceClaimTemplateName")
        claim_name = entry.get("resourceClaimName")
        if template_name:
            key = (ns, str(template_name))
            template = self.templates.get(key)
            if template is not None:
                self.used.add(("ResourceClaimTemplate", *key))
            elif self.lookup is not None:
                template = self.lookup("ResourceClaimTemplate", ns, str(template_name))
            if template is None:
                raise WhatIfError(
                    f"{path}.resourceClaimTemplateName",
                    f"ResourceClaimTemplate {ns}/{template_name} not found",
                )
            claim = _claim_from_template(
                template, name=f"{meta['name']}-{entry.get('name')}", namespace=ns
            )
            return InputClaim(obj=claim, source=path, classic="classic" in claim)
        if claim_name:
            key = (ns, str(claim_name))
            found = self.claims.get(key)
            if found is not None:
                self.used.add(("ResourceClaim", *key))
                return found
            found = self.existing.get(key)
            if found is None and self.lookup is not None:
                obj = self.lookup("ResourceClaim", ns, str(claim_name))
                if obj is not None:
                    found = self.existing[key] = InputClaim(
                        obj=obj, source=path, existing=True, classic="classic" in obj
                    )
            if found is None:
                raise WhatIfError(
                    f"{path}.resourceClaimName", f"ResourceClaim {ns}/{claim_name} not found"
                )
            return found
        raise WhatIfError(path, "needs resourceClaimName or resourceClaimTemplateName")

    def pod(self, obj: JSON, *, where: str, workload: str = "", per_node: bool = False) -> InputPod:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        entries = spec.get("resourceClaims") or []
        claims = [
            self.claim_for(entry, pod=obj, path=f"{where}: spec.resourceClaims[{index}]")
            for index, entry in enumerate(entries)
        ]
        requests = implicit_requests(spec, mapping=self.extended, where=where)
        unknown = sorted(
            name
            for name in requested_names(spec)
            if name.startswith(DEVICE_CLASS_PREFIX) and name not in self.extended
        )
        if unknown:
            raise WhatIfError(
                f"{where}: spec.containers: resources",
                f"DeviceClass {unknown[0].removeprefix(DEVICE_CLASS_PREFIX)!r} not found",
            )
        check_quantities(spec, where=where)
        if requests:
            implicit = implicit_claim(obj, requests=requests)
            implicit["metadata"]["namespace"] = str(meta.get("namespace") or self.namespace)
            claims.append(InputClaim(obj=implicit, source=f"{where}: spec.containers: resources"))
        return InputPod(
            name=str(meta["name"]),
            namespace=str(meta.get("namespace") or self.namespace),
            source=where,
            spec=spec,
            claims=claims,
            node_filter=NodeFilter.from_pod_spec(spec, where=where),
            workload=workload,
            per_node=per_node,
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        )


def parse_input(
    source: Any,
    *,
    namespace: str | None,
    lookup: Lookup | None = None,
    extended: Mapping[str, str] | None = None,
) -> ParsedInput:
    """Documents -> the pods to place, in document order (replicas in order).

    `extended` maps extended resource names to the DeviceClass backing them
    (`extended.class_mapping`).
    """
    if namespace is not None and not isinstance(namespace, str):
        raise WhatIfError("namespace", "expected a namespace name (a string)")
    if namespace and (reason := dns1123_label(namespace)):
        raise WhatIfError("namespace", reason)
    documents = load_documents(source)
    ns_default = namespace or DEFAULT_NAMESPACE
    parsed = ParsedInput(namespace=ns_default)
    reader = _Reader(namespace=ns_default, lookup=lookup, extended=extended or {})
    # (where, kind, normalized objects, workload label, per node)
    pending: list[tuple[str, str, list[JSON], str, bool]] = []
    first_namespace: str | None = None
    # Each ResourceClaim document's own claim (two documents may repeat a name).
    own: dict[int, InputClaim] = {}
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
        if kind == "Namespace":
            meta = document.get("metadata")
            labels = meta.get("labels") if isinstance(meta, Mapping) else None
            if not isinstance(meta, Mapping) or not meta.get("name"):
                raise WhatIfError(f"{where}: metadata.name", "required field missing")
            if labels is not None and not isinstance(labels, Mapping):
                raise WhatIfError(f"{where}: metadata.labels", "expected a map")
            parsed.namespaces[str(meta["name"])] = {
                str(k): str(v) for k, v in (labels or {}).items()
            }
            continue
        if kind in WORKLOAD_KINDS:
            workload = expand_workload(document, where=where)
            pods = [_normalize(p, where=where, namespace=ns_default) for p in workload.pods]
            pending.append((where, "Pod", pods, f"{kind}/{workload.name}", workload.per_node))
            first_namespace = first_namespace or _namespace_of(pods[0] if pods else {})
            continue
        if kind not in {"Pod", *_CLAIM_KINDS}:
            parsed.ignored.append(
                {
                    "document": where,
                    "kind": kind,
                    "name": _name_of(document),
                    "reason": "not a kind what-if places",
                }
            )
            continue
        obj = _normalize(document, where=where, namespace=ns_default)
        first_namespace = first_namespace or _namespace_of(obj)
        meta = obj["metadata"]
        key = (str(meta.get("namespace") or ns_default), str(meta["name"]))
        if kind == "ResourceClaimTemplate":
            reader.templates[key] = obj
        elif kind == "ResourceClaim":
            own[id(obj)] = InputClaim(obj=obj, source=where, classic="classic" in obj)
            reader.claims[key] = own[id(obj)]
        pending.append((where, kind, [obj], "", False))
    if namespace is None and first_namespace:
        parsed.namespace = first_namespace
        reader.namespace = first_namespace
    has_pod = any(kind == "Pod" for _, kind, _, _, _ in pending)
    loose: list[InputClaim] = []
    for where, kind, objects, label, per_node in pending:
        if kind == "Pod":
            for obj in objects:
                parsed.pods.append(reader.pod(obj, where=where, workload=label, per_node=per_node))
        elif not has_pod:
            obj = objects[0]
            meta = obj["metadata"]
            if kind == "ResourceClaim":
                loose.append(own[id(obj)])
            else:
                claim = _claim_from_template(
                    obj, name=f"{meta['name']}-what-if", namespace=str(meta["namespace"])
                )
                loose.append(InputClaim(obj=claim, source=where, classic="classic" in obj))
    if has_pod:
        _list_unused(parsed, reader, pending)
    elif loose:
        parsed.pods.append(
            InputPod(
                name=IMPLICIT_POD,
                namespace=parsed.namespace,
                source="yaml",
                spec={},
                claims=loose,
                node_filter=NodeFilter(),
                implicit=True,
            )
        )
    if not parsed.pods:
        if has_pod:
            # A workload scaled to zero.
            raise WhatIfError("yaml", "the input makes no pod to place")
        raise WhatIfError(
            "yaml", "the input has no pod and no ResourceClaim" + _ignored_note(parsed)
        )
    if len(parsed.pods) > MAX_PODS:
        raise WhatIfError("yaml", f"at most {MAX_PODS} pods in one what-if")
    if any(len(p.claims) > MAX_CLAIMS for p in parsed.pods) or (
        len(parsed.claims) > MAX_TOTAL_CLAIMS
    ):
        raise WhatIfError("yaml", f"at most {MAX_CLAIMS} claims per pod in one what-if")
    for input_claim in parsed.simulated:
        _check_claim(input_claim)
    return parsed


def _namespace_of(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    return str(meta["namespace"]) if meta.get("namespace") else None


def _ignored_note(parsed: ParsedInput) -> str:
    if not parsed.ignored:
        return ""
    kinds = sorted({str(i["kind"]) for i in parsed.ignored})
    return f" (ignored: {', '.join(kinds)})"


def _list_unused(
    parsed: ParsedInput, reader: _Reader, pending: list[tuple[str, str, list[JSON], str, bool]]
) -> None:
    for where, kind, objects, _, _ in pending:
        if kind not in _CLAIM_KINDS:
            continue
        meta = objects[0]["metadata"]
        if (kind, str(meta.get("namespace")), str(meta["name"])) in reader.used:
            continue
        parsed.ignored.append(
            {
                "document": where,
                "kind": kind,
                "name": str(meta["name"]),
                "reason": "no pod of the input uses it (claims are allocated for pods)",
            }
        )
