"""Asking the API server what a person may do: authorization.k8s.io/v1 SubjectAccessReview.

The dashboard reads the cluster with its own service account; what it shows a person is what
that person's Kubernetes identity (user name and groups) may `list`. The API server's
authorizers (RBAC, webhooks, Node...) answer one question per review; this module builds the
review and reads `status.allowed`, nothing else: `denied` only says an authorizer refused
outright, and either way the person may not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dralib.kube.client import JSON, KubeClient, TransportError

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class AccessQuestion:
    """May `user` (with `groups`) do `verb` on `resource` in `group`, in `namespace`
    ("" asks cluster-wide: every namespace at once)?"""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource: str
    group: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class AccessAnswer:
    """The review's status: allowed, and the authorizer's reason (for logs)."""

    allowed: bool
    reason: str = ""
    evaluation_error: str = ""


def review_body(question: AccessQuestion) -> JSON:
    """The SubjectAccessReview object the API server is sent for `question`."""
    attributes: JSON = {
        "verb": question.verb,
        "group": question.group,
        "resource": question.resource,
    }
    if question.namespace:
        attributes["namespace"] = question.namespace
    spec: JSON = {"resourceAttributes": attributes, "user": question.user}
    if question.groups:
        spec["groups"] = list(question.groups)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def review(client: KubeClient, question: AccessQuestion) -> AccessAnswer:
    """Create one SubjectAccessReview and read its status; raises KubeError when unanswered."""
    answer = client.create(SAR_PATH, review_body(question))
    status = answer.get("status")
    if not isinstance(status, dict):
        raise TransportError(f"POST {SAR_PATH}: the answer has no status")
    return AccessAnswer(
        allowed=status.get("allowed") is True,
        reason=str(status.get("reason") or ""),
        evaluation_error=str(status.get("evaluationError") or ""),
    )


def review_all(client: KubeClient, questions: Sequence[AccessQuestion]) -> list[AccessAnswer]:
    """The answers to `questions`, in order (one review each: the API has no batch form)."""
    return [review(client, question) for question in questions]
