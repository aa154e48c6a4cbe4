"""SubjectAccessReviews for the fake API server, answered as kube-apiserver's RBAC authorizer would.

The rule table is RBAC's own objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding, in
their v1 shape), loaded with `RbacTable.load`. A review is validated like the API server's
`ValidateSubjectAccessReview` (422 Invalid naming the fields), then the rules that apply to the
user are visited in RBAC's order: ClusterRoleBindings first, then RoleBindings of the review's
namespace. The first rule that allows ends the visit, with RBAC's "allowed by ..." reason; none
is RBAC's "no opinion": allowed false and denied false, as the API server answers with RBAC as
the only authorizer. Aggregated ClusterRoles and non-resource URLs in rules are not modelled:
non-resource reviews are never allowed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

AUTHORIZATION_GROUP = "authorization.k8s.io"
SAR_KIND = "SubjectAccessReview"
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a role."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]

    def allows(self, *, verb: str, group: str, resource: str, sub: str, name: str) -> bool:
        # As rbac's RuleAllows: verb, group, resource (or resource/subresource, or */sub),
        # and resourceNames only when the rule lists some.
        combined = f"{resource}/{sub}" if sub else resource
        resource_ok = (
            "*" in self.resources
            or combined in self.resources
            or (bool(sub) and f"*/{sub}" in self.resources)
        )
        return (
            ("*" in self.verbs or verb in self.verbs)
            and ("*" in self.api_groups or group in self.api_groups)
            and resource_ok
            and (not self.resource_names or name in self.resource_names)
        )


@dataclass(frozen=True)
class Binding:
    """A RoleBinding (namespace set) or ClusterRoleBinding: subjects and the role it grants."""

    kind: str
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[Mapping[str, str], ...]

    def subject_for(self, user: str, groups: frozenset[str]) -> Mapping[str, str] | None:
        """The first subject that names the user, one of the groups or the user's service
        account (`system:serviceaccount:<ns>:<name>`), or None."""
        for subject in self.subjects:
            kind, name = subject.get("kind"), subject.get("name", "")
            if kind == "User" and name == user:
                return subject
            if kind == "Group" and name in groups:
                return subject
            if kind == "ServiceAccount":
                namespace = subject.get("namespace") or self.namespace
                if user == f"system:serviceaccount:{namespace}:{name}":
                    return subject
        return None

    def describe(self, subject: Mapping[str, str]) -> str:
        """Who allowed it, in RBAC's words (`ClusterRoleBinding "x" of ClusterRole "y" to ...`)."""
        label = self.name if self.kind == "ClusterRoleBinding" else f"{self.name}/{self.namespace}"
        who = subject.get("name", "")
        if subject.get("kind") == "ServiceAccount":
            who = f"{who}/{subject.get('namespace') or self.namespace}"
        return (
            f'{self.kind} "{label}" of {self.role_kind} "{self.role_name}" '
            f'to {subject.get("kind")} "{who}"'
        )


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _rules(obj: Obj) -> tuple[Rule, ...]:
    return tuple(
        Rule(
            verbs=_strings(rule.get("verbs")),
            api_groups=_strings(rule.get("apiGroups")),
            resources=_strings(rule.get("resources")),
            resource_names=_strings(rule.get("resourceNames")),
        )
        for rule in obj.get("rules") or []
        if isinstance(rule, dict)
    )


def _binding(obj: Obj) -> Binding:
    metadata = obj.get("metadata") or {}
    ref = obj.get("roleRef") or {}
    return Binding(
        kind=str(obj["kind"]),
        name=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace", "")),
        role_kind=str(ref.get("kind", "")),
        role_name=str(ref.get("name", "")),
        subjects=tuple(
            {str(k): str(v) for k, v in subject.items()}
            for subject in obj.get("subjects") or []
            if isinstance(subject, dict)
        ),
    )


class RbacTable:
    """The RBAC objects the fake API server authorizes with; safe to read while replaced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        self._cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self._bindings: tuple[Binding, ...] = ()
        self.reviews = 0

    def load(self, objects: Iterable[Obj]) -> None:
        """Replace the table with these Role/ClusterRole/RoleBinding/ClusterRoleBinding objects."""
        roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        cluster_roles: dict[str, tuple[Rule, ...]] = {}
        bindings: list[Binding] = []
        for obj in objects:
            kind = obj.get("kind")
            metadata = obj.get("metadata") or {}
            if kind == "Role":
                roles[(str(metadata.get("namespace", "")), str(metadata["name"]))] = _rules(obj)
            elif kind == "ClusterRole":
                cluster_roles[str(metadata["name"])] = _rules(obj)
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                bindings.append(_binding(obj))
            else:
                raise ValueError(f"not an RBAC object: kind {kind!r}; expected one of {RBAC_KINDS}")
        with self._lock:
            self._roles, self._cluster_roles = roles, cluster_roles
            self._bindings = tuple(bindings)

    def authorize(self, attributes: Mapping[str, Any], *, user: str, groups: Iterable[str]) -> str:
        """RBAC's reason when a rule allows the request, "" when none does (no opinion)."""
        with self._lock:
            self.reviews += 1
            roles, cluster_roles, bindings = self._roles, self._cluster_roles, self._bindings
        namespace = str(attributes.get("namespace") or "")
        request = {
            "verb": str(attributes.get("verb") or ""),
            "group": str(attributes.get("group") or ""),
            "resource": str(attributes.get("resource") or ""),
            "sub": str(attributes.get("subresource") or ""),
            "name": str(attributes.get("name") or ""),
        }
        member_of = frozenset(groups)
        cluster_wide = [b for b in bindings if b.kind == "ClusterRoleBinding"]
        local = [b for b in bindings if b.kind == "RoleBinding" and b.namespace == namespace]
        for binding in (*cluster_wide, *(local if namespace else [])):
            subject = binding.subject_for(user, member_of)
            if subject is None:
                continue
            if binding.role_kind == "ClusterRole":
                rules = cluster_roles.get(binding.role_name, ())
            elif binding.kind == "RoleBinding":
                rules = roles.get((binding.namespace, binding.role_name), ())
            else:
                rules = ()
            if any(rule.allows(**request) for rule in rules):
                return f"RBAC: allowed by {binding.describe(subject)}"
        return ""


def _invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    shown = "null" if value is None else value
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_quoted(shown)}: {detail}",
        "field": field,
    }


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def validate_review(review: Any) -> list[dict[str, str]]:
    """The causes the API server's ValidateSubjectAccessReview would give (empty: valid)."""
    if not isinstance(review, dict):
        return [_invalid("spec", None, "must be an object")]
    given = review.get("spec")
    spec: Obj = given if isinstance(given, dict) else {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    causes = []
    if resource is not None and non_resource is not None:
        causes.append(
            _invalid(
                "spec.nonResourceAttributes",
                non_resource,
                "cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        causes.append(
            _invalid(
                "spec.resourceAttributes",
                None,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        )
    if not spec.get("user") and not spec.get("groups"):
        causes.append(
            _invalid(
                "spec.user",
                spec.get("user") or "",
                "at least one of user or group must be specified",
            )
        )
    metadata = review.get("metadata")
    if isinstance(metadata, dict) and {
        k: v for k, v in metadata.items() if v and k != "managedFields"
    }:
        causes.append(_invalid("metadata", "{...}", "must be empty"))
    return causes


def answer_review(table: RbacTable, review: Obj) -> Obj:
    """The created review as the API server returns it (201): the spec and its status."""
    spec = review.get("spec") or {}
    groups = _strings(spec.get("groups"))
    resource = spec.get("resourceAttributes")
    reason = ""
    if isinstance(resource, dict):
        reason = table.authorize(resource, user=str(spec.get("user") or ""), groups=groups)
    status: Obj = {"allowed": bool(reason)}
    if reason:
        status["reason"] = reason
    return {
        "kind": SAR_KIND,
        "apiVersion": f"{AUTHORIZATION_GROUP}/v1",
        "metadata": {},
        "spec": spec,
        "status": status,
    }
