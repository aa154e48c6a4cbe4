"""The demo cluster's two teams: what each may see, asked of its fake API server over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command

from demo.catalog import NAMESPACES
from demo.server import load_demo
from dralib.kube.client import load_client
from dralib.kube.fakeapi import FakeApiServer
from inventory.visibility import ask_cluster


def test_demo_teams_see_their_own_namespaces(tmp_path: Path) -> None:
    """team-a reads team-a and ml-training, team-b team-b and inference, dra-admins all, and
    nobody else anything, by SubjectAccessReviews the demo server answers from its RBAC."""
    with FakeApiServer() as server:
        load_demo(server, nodes=2, seed=1)
        path = server.write_kubeconfig(tmp_path / "kubeconfig.yaml")

        def seen(user: str, *groups: str) -> Any:
            return ask_cluster(
                (user, groups),
                namespaces=list(NAMESPACES),
                client_factory=lambda: load_client(kubeconfig=path),
            )

        assert seen("alice", "team-a").namespaces == {"team-a", "ml-training"}
        assert seen("bob", "team-b").namespaces == {"team-b", "inference"}
        assert seen("carol", "dra-admins").everything
        nobody = seen("mallory", "system:authenticated")
        assert (nobody.everything, nobody.namespaces, nobody.error) == (False, frozenset(), "")


def test_demo_people_are_made_once_with_their_team(db: Any, settings: Any, tmp_path: Path) -> None:
    """alice (team-a) and bob (team-b) get random passwords kept owner-only; a second run
    leaves them as they are."""
    settings.VAR_DIR = tmp_path
    call_command("demo_people")
    kept = (tmp_path / "demo-people").read_text()
    assert kept.count("\n") == 2
    assert (tmp_path / "demo-people").stat().st_mode & 0o077 == 0
    alice = User.objects.get(username="alice")
    assert [g.name for g in alice.groups.all()] == ["team-a"]
    password = kept.split("alice (team-a): ")[1].split("\n")[0]
    assert alice.check_password(password)
    call_command("demo_people")
    assert (tmp_path / "demo-people").read_text() == kept
    assert list(User.objects.get(username="bob").groups.values_list("name", flat=True)) == [
        "team-b"
    ]
