"""SubjectAccessReviews on the fake API server, over real HTTP with the official client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dralib.kube.access import AccessQuestion, review
from dralib.kube.client import ApiStatusError, TransportError, load_client
from dralib.kube.fakeapi import FakeApiServer

RBAC: list[dict[str, Any]] = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "claim-reader"},
        "rules": [
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "team-a-read", "namespace": "team-a"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "claim-reader",
        },
        "subjects": [{"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "pods-only", "namespace": "team-b"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"], "resourceNames": []}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "bob-pods", "namespace": "team-b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods-only"},
        "subjects": [{"kind": "User", "name": "bob"}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "auditors"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "claim-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "audit", "namespace": "ops"}],
    },
]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.load_rbac(RBAC)
        yield fake


@pytest.fixture
def authz_api(server: FakeApiServer, tmp_path: Path) -> Iterator[client.AuthorizationV1Api]:
    api_client = config.new_client_from_config(
        config_file=str(server.write_kubeconfig(tmp_path / "kubeconfig.yaml"))
    )
    yield client.AuthorizationV1Api(api_client)
    api_client.close()


def ask(api: client.AuthorizationV1Api, **spec: Any) -> client.V1SubjectAccessReviewStatus:
    body = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(**spec))
    return api.create_subject_access_review(body).status


def attrs(resource: str, namespace: str = "", *, group: str = "", verb: str = "list") -> Any:
    return client.V1ResourceAttributes(
        verb=verb, group=group, resource=resource, namespace=namespace or None
    )


def test_group_bound_in_its_namespace_is_allowed_with_rbacs_reason(authz_api: Any) -> None:
    """A group's RoleBinding to a ClusterRole allows list there, naming the binding as RBAC does."""
    status = ask(
        authz_api,
        user="alice",
        groups=["team-a"],
        resource_attributes=attrs("resourceclaims", "team-a", group="resource.k8s.io"),
    )
    assert status.allowed is True
    assert status.reason == (
        'RBAC: allowed by RoleBinding "team-a-read/team-a" of ClusterRole "claim-reader" '
        'to Group "team-a"'
    )


def test_other_namespace_cluster_wide_and_wrong_group_get_no_opinion(authz_api: Any) -> None:
    """Outside its namespace, cluster-wide, or in the wrong API group, nothing allows: RBAC has
    no opinion (allowed and denied both false)."""
    for attributes in (
        attrs("resourceclaims", "team-b", group="resource.k8s.io"),
        attrs("resourceclaims", "", group="resource.k8s.io"),
        attrs("resourceclaims", "team-a", group=""),
        attrs("resourceclaims", "team-a", group="resource.k8s.io", verb="watch"),
    ):
        status = ask(authz_api, user="alice", groups=["team-a"], resource_attributes=attributes)
        assert (status.allowed, bool(status.denied)) == (False, False), attributes


def test_role_user_subject_wildcard_verb_and_subresources(authz_api: Any) -> None:
    """A Role bound to a User: '*' verbs match, the subresource needs its own entry."""
    assert ask(authz_api, user="bob", resource_attributes=attrs("pods", "team-b", verb="delete"))
    assert ask(authz_api, user="bob", resource_attributes=attrs("pods", "team-b")).allowed
    sub = client.V1ResourceAttributes(
        verb="get", resource="pods", subresource="log", namespace="team-b"
    )
    assert ask(authz_api, user="bob", resource_attributes=sub).allowed is False
    sub_a = client.V1ResourceAttributes(
        verb="get", resource="pods", subresource="log", namespace="team-a"
    )
    assert ask(authz_api, user="x", groups=["team-a"], resource_attributes=sub_a).allowed is True


def test_service_account_subject_matches_its_username(authz_api: Any) -> None:
    """A ServiceAccount subject matches `system:serviceaccount:<ns>:<name>`, cluster-wide."""
    status = ask(
        authz_api,
        user="system:serviceaccount:ops:audit",
        resource_attributes=attrs("pods", "anything"),
    )
    assert status.allowed is True
    assert 'to ServiceAccount "audit/ops"' in status.reason


def test_empty_spec_is_invalid_with_field_causes(authz_api: Any) -> None:
    """No attributes and no user: 422 Invalid naming spec.resourceAttributes and spec.user."""
    with pytest.raises(ApiException) as caught:
        authz_api.create_subject_access_review(
            client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec())
        )
    assert caught.value.status == 422
    body = caught.value.body.decode() if isinstance(caught.value.body, bytes) else caught.value.body
    assert "spec.resourceAttributes" in body and "spec.user" in body
    assert "at least one of user or group must be specified" in body


def test_both_attribute_kinds_are_invalid(authz_api: Any) -> None:
    """resourceAttributes with nonResourceAttributes: 422 naming spec.nonResourceAttributes."""
    with pytest.raises(ApiException) as caught:
        ask(
            authz_api,
            user="alice",
            resource_attributes=attrs("pods", "team-a"),
            non_resource_attributes=client.V1NonResourceAttributes(path="/healthz", verb="get"),
        )
    assert caught.value.status == 422
    assert "spec.nonResourceAttributes" in str(caught.value.body)


def test_project_client_reviews_and_reports_down_server(
    server: FakeApiServer, tmp_path: Path
) -> None:
    """dralib's review() round-trips; a stopped server is a TransportError, a bad one a status."""
    kube = load_client(kubeconfig=server.write_kubeconfig(tmp_path / "k.yaml"))
    question = AccessQuestion(
        user="alice", groups=("team-a",), verb="list", resource="pods", namespace="team-a"
    )
    assert review(kube, question).allowed is True
    assert (
        review(kube, AccessQuestion(user="alice", groups=(), verb="list", resource="pods")).allowed
        is False
    )
    assert server.rbac.reviews == 2
    with pytest.raises(ApiStatusError) as invalid:
        kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {"spec": {}})
    assert invalid.value.status == 422
    with pytest.raises(ApiStatusError) as refused:
        kube.create("/api/v1/namespaces/x/pods", {"kind": "Pod"})
    assert refused.value.status == 405
    server.stop()
    with pytest.raises(TransportError):
        review(kube, question)
