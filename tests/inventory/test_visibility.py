"""Who sees which namespace: SubjectAccessReviews over HTTP to the fake API server, the cache,
failing closed, and the answers' redaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import connection
from django.test import Client

from dashboard import scope
from dralib.kube.fakeapi import FakeApiServer
from inventory import visibility
from inventory.choices import Kind
from inventory.visibility import (
    EVERYTHING,
    OTHER_CLAIM,
    OTHER_POD,
    Visibility,
    VisibilityCache,
    hide_other_namespaces,
    visibility_of_user,
)
from tests.factories import claim_object, create, store

NAMESPACES = ("team-a", "team-b", "ml-training")
RBAC: list[dict[str, Any]] = [
    {
        "kind": "ClusterRole",
        "metadata": {"name": "reader"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]},
        ],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "pods-only"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    },
    *(
        {
            "kind": "RoleBinding",
            "metadata": {"name": f"{group}-{ns}", "namespace": ns},
            "roleRef": {"kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "Group", "name": group}],
        }
        for group, ns, role in (
            ("team-a", "team-a", "reader"),
            ("team-a", "ml-training", "reader"),
            ("team-b", "team-b", "reader"),
            # Pods alone are not enough: the namespace stays hidden from team-b.
            ("team-b", "ml-training", "pods-only"),
        )
    ),
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "auditors"},
        "roleRef": {"kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "Group", "name": "auditors"}],
    },
]


@pytest.fixture
def cluster(settings: Any, tmp_path: Path) -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.load_rbac(RBAC)
        settings.KUBECONFIG = str(server.write_kubeconfig(tmp_path / "kubeconfig.yaml"))
        settings.RBAC_VISIBILITY = True
        visibility.cache.clear()
        yield server
        visibility.cache.clear()


def namespaces() -> None:
    store(
        Kind.NAMESPACE,
        *(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "uid": f"u-{ns}"}}
            for ns in NAMESPACES
        ),
    )


def member(name: str, *groups: str, **extra: Any) -> User:
    user = User.objects.create_user(name, password=f"{name}-password-long", **extra)
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def test_each_team_sees_the_namespaces_it_may_list_pods_and_claims_in(
    db: Any, cluster: FakeApiServer
) -> None:
    """team-a lists both kinds in team-a and ml-training; team-b only pods in ml-training, so
    only team-b is visible to it; a cluster-wide binding sees everything with two reviews."""
    namespaces()
    alice = visibility_of_user(member("alice", "team-a"))
    bob = visibility_of_user(member("bob", "team-b"))
    assert (alice.everything, alice.namespaces) == (False, {"team-a", "ml-training"})
    assert (bob.everything, bob.namespaces) == (False, {"team-b"})
    before = cluster.rbac.reviews
    assert visibility_of_user(member("carol", "auditors")) == EVERYTHING
    assert cluster.rbac.reviews - before == 2


def test_superusers_anonymous_and_visibility_off_ask_nothing(
    db: Any, cluster: FakeApiServer, settings: Any
) -> None:
    """An admin sees everything, an anonymous reader nothing, without a review; off: all."""
    namespaces()
    admin = User.objects.create_superuser("root", password="root-password-long")
    assert visibility_of_user(admin) == EVERYTHING
    assert visibility_of_user(AnonymousUser()).namespaces == frozenset()
    assert not visibility_of_user(AnonymousUser()).everything
    settings.RBAC_VISIBILITY = False
    assert visibility_of_user(member("dave", "nobody")) == EVERYTHING
    assert cluster.rbac.reviews == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_one_person_review_once(cluster: FakeApiServer) -> None:
    """Sixteen threads asking for alice at once make one round of reviews (1 cluster-wide, 3
    namespaces' pods, 2 namespaces' claims), not sixteen."""
    namespaces()
    alice = member("alice", "team-a")
    start = threading.Barrier(16)
    answers: list[Visibility] = []

    def ask() -> None:
        start.wait()
        try:
            answers.append(visibility_of_user(alice))
        finally:
            # As a request's end does: a pooled connection kept by an ended thread is one the
            # pool cannot lend to the threads still waiting (PostgreSQL, a pool of ten).
            connection.close()

    threads = [threading.Thread(target=scope.carried(ask)) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 16
    assert {a.namespaces for a in answers} == {frozenset({"team-a", "ml-training"})}
    assert cluster.rbac.reviews == 6


def test_cache_single_flight_bound_and_expiry() -> None:
    """One lookup per identity however many threads wait; the oldest identity leaves first
    past `size`; an answer is looked up again once `ttl` has passed (a fake clock)."""
    now = [0.0]
    cache = VisibilityCache(ttl=60, size=3, clock=lambda: now[0])
    release = threading.Event()
    calls: list[str] = []

    def slow_lookup() -> Visibility:
        calls.append("x")
        release.wait(10)
        return Visibility(everything=False, namespaces=frozenset({"a"}))

    threads = [
        threading.Thread(target=scope.carried(cache.get), args=(("u", ()), slow_lookup))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    # Let the waiters pile up behind the first lookup (the count holds whatever the timing).
    time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join()
    assert calls == ["x"]
    for index in range(5):
        cache.get((f"user-{index}", ()), lambda: EVERYTHING)
    assert len(cache) == 3
    assert cache.get(("u", ()), lambda: EVERYTHING) == EVERYTHING  # "u" was dropped
    now[0] = 61.0
    assert cache.get(("user-4", ()), lambda: Visibility(everything=False)).everything is False


def test_api_server_down_fails_closed_with_a_banner(db: Any, cluster: FakeApiServer) -> None:
    """With the API server gone nobody but admins sees a namespaced object, and pages say why;
    capacity still answers."""
    namespaces()
    create(claim_object("c-1", namespace="team-a"))
    cluster.stop()
    alice = member("alice", "team-a")
    seen = visibility_of_user(alice)
    assert (seen.everything, seen.namespaces) == (False, frozenset())
    assert "did not answer" in seen.error
    client = Client()
    client.force_login(alice)
    page = client.get("/claims/").content.decode()
    assert "c-1" not in page
    assert 'id="visibility-banner"' in page
    assert client.get("/api/claims/resource-claims/").json()["results"] == []
    assert client.get("/claims/team-a/c-1/").status_code == 404
    assert client.get("/api/inventory/availability/").status_code == 200


def test_answers_name_no_object_of_a_hidden_namespace(db: Any) -> None:
    """Objects of other namespaces keep their place, not their names; `ns/name` in text and in
    pod fields becomes "a claim/pod in another namespace"."""
    namespaces()
    seen = Visibility(everything=False, namespaces=frozenset({"team-a"}))
    answer = {
        "holders": [
            {
                "namespace": "team-b",
                "name": "secret-claim",
                "pods": ["secret-pod-by-name", {"namespace": "team-b", "name": "secret-p"}],
                "devices": 2,
                "request": "gpu",
                "note": "team-b's secret",
            },
            {"namespace": "team-a", "name": "mine"},
        ],
        "reason": "device gpu-0 is held by team-b/secret-claim and team-a/mine",
        "pod": "team-b/secret-pod",
    }
    hidden = hide_other_namespaces(answer, seen)
    assert "secret" not in repr(hidden) and "team-b" not in repr(hidden)
    assert hidden["holders"][0] == {
        "pods": [{"namespace": "", "name": OTHER_POD, "hidden": True}],
        "devices": 2,
        "request": "gpu",
        "namespace": "",
        "name": OTHER_CLAIM,
        "hidden": True,
    }
    assert hidden["holders"][1] == {"namespace": "team-a", "name": "mine"}
    assert hidden["reason"] == f"device gpu-0 is held by {OTHER_CLAIM} and team-a/mine"
    assert hidden["pod"] == OTHER_POD
    assert hide_other_namespaces(answer, EVERYTHING) is answer


def test_public_readers_see_capacity_only(db: Any, settings: Any) -> None:
    """With DASHBOARD_PUBLIC_READ an anonymous reader gets pages and capacity, but no claim:
    they have no Kubernetes identity to ask about."""
    settings.PUBLIC_READ = True
    namespaces()
    create(claim_object("c-1", namespace="team-a"))
    client = Client()
    assert "c-1" not in client.get("/claims/").content.decode()
    assert client.get("/api/claims/resource-claims/").json()["results"] == []
    assert client.get("/claims/team-a/c-1/").status_code == 404
    assert client.get("/api/inventory/availability/").status_code == 200
