"""Admin access checked against synced Namespaces when the input pastes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from claims.whatif.service import what_if
from demo.catalog import ADMIN_NAMESPACE, ADMIN_NAMESPACE_LABEL
from inventory.models import Namespace
from tests.claims.whatif.cluster import GPUS_PER_NODE
from tests.claims.whatif.conftest import load_objects

FIXTURES = Path(__file__).parent / "fixtures"
NAMESPACE = "gpu-admin"


def documents() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((FIXTURES / "admin-access.yaml").read_text()))


def without_namespace() -> str:
    """The admin-access input without its Namespace document."""
    return yaml.safe_dump_all([d for d in documents() if d["kind"] != "Namespace"])


def store_namespace(labels: dict[str, str]) -> None:
    load_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": NAMESPACE, "uid": "uid-gpu-admin", "labels": labels},
            }
        ]
    )


def admin_checks(answer: dict[str, Any]) -> list[Any]:
    return [c["allowed"] for c in answer["apiServer"]["checks"] if c["check"] == "adminAccess"]


def test_stored_labelled_namespace_admits_admin_access(small) -> None:
    """A synced namespace with the admin-access label admits the claim without a pasted one."""
    store_namespace({ADMIN_NAMESPACE_LABEL: "true"})
    answer = what_if(without_namespace(), use_cache=False)
    assert admin_checks(answer) == [True]
    assert answer["fits"] is True
    assert len(answer["pods"][0]["claims"][0]["devices"]) == GPUS_PER_NODE


def test_stored_unlabelled_namespace_refuses_admin_access(small) -> None:
    """A synced namespace without the label refuses the claim as the API server would."""
    store_namespace({"kubernetes.io/metadata.name": NAMESPACE})
    answer = what_if(without_namespace(), use_cache=False)
    assert admin_checks(answer) == [False]
    assert answer["fits"] is False
    assert "refused by the API server" in answer["reasons"][0]


def test_pasted_namespace_wins_over_the_stored_one(small) -> None:
    """The input's Namespace document is what the user asks about: it overrides the synced one."""
    store_namespace({ADMIN_NAMESPACE_LABEL: "true"})
    pasted = documents()
    pasted[0]["metadata"]["labels"] = {}
    answer = what_if(yaml.safe_dump_all(pasted), use_cache=False)
    assert admin_checks(answer) == [False]


def test_cached_answer_follows_a_label_change(small) -> None:
    """Relabelling the synced namespace changes the answer even when answers are cached."""
    store_namespace({})
    assert admin_checks(what_if(without_namespace())) == [False]
    Namespace.objects.filter(name=NAMESPACE).update(labels={ADMIN_NAMESPACE_LABEL: "true"})
    answer = what_if(without_namespace())
    assert answer["cached"] is False
    assert admin_checks(answer) == [True]


def test_demo_admin_namespace_is_synced_labelled(demo) -> None:
    """The demo's admin namespace arrives labelled, so admin claims there are admitted."""
    assert Namespace.objects.get(name=ADMIN_NAMESPACE).labels[ADMIN_NAMESPACE_LABEL] == "true"
    moved = [d for d in documents() if d["kind"] != "Namespace"]
    for document in moved:
        document["metadata"]["namespace"] = ADMIN_NAMESPACE
        if document["kind"] == "ResourceClaimTemplate":
            # One device: "All" fails on the demo's deliberately incomplete fabric pool.
            for request in document["spec"]["spec"]["devices"]["requests"]:
                request["exactly"].pop("allocationMode")
    answer = what_if(yaml.safe_dump_all(moved), use_cache=False)
    assert admin_checks(answer) == [True]
    assert answer["fits"] is True
    for document in moved:
        document["metadata"]["namespace"] = "team-a"
    assert admin_checks(what_if(yaml.safe_dump_all(moved), use_cache=False)) == [False]
