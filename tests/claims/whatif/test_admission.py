"""What the API server refuses before scheduling: admin access, reservedFor limits; and quotas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from claims.whatif.service import what_if
from inventory.models import SyncState
from tests.claims.whatif.cluster import DRIVER, GPUS_PER_NODE
from tests.claims.whatif.conftest import load_objects

FIXTURES = Path(__file__).parent / "fixtures"


def admin_file(label: str | None) -> str:
    """The admin-access file with the namespace label set to `label` (None: no label)."""
    documents = list(yaml.safe_load_all((FIXTURES / "admin-access.yaml").read_text()))
    namespace = documents[0]
    if label is None:
        namespace["metadata"].pop("labels")
    else:
        namespace["metadata"]["labels"]["resource.kubernetes.io/admin-access"] = label
    return yaml.safe_dump_all(documents)


def test_admin_access_in_a_labelled_namespace_fits(small) -> None:
    """The labelled namespace admits the admin claim, which sees every device of a node."""
    answer = what_if(admin_file("true"), use_cache=False)
    assert answer["fits"] is True
    assert [c["allowed"] for c in answer["apiServer"]["checks"]] == [True]
    assert len(answer["pods"][0]["claims"][0]["devices"]) == GPUS_PER_NODE


def test_admin_access_without_the_label_is_refused(small) -> None:
    """Without the label the API server refuses the claim, and the answer says so."""
    answer = what_if(admin_file(None), use_cache=False)
    assert answer["fits"] is False
    assert [c["allowed"] for c in answer["apiServer"]["checks"]] == [False]
    assert "refused by the API server" in answer["reasons"][0]
    assert answer["pods"][0]["fits"] is False


def test_admin_access_with_unknown_namespace_labels_says_so(small) -> None:
    """No Namespace document: the labels are unknown, said, not guessed."""
    documents = [d for d in yaml.safe_load_all(admin_file("true")) if d["kind"] != "Namespace"]
    answer = what_if(yaml.safe_dump_all(documents), use_cache=False)
    check = answer["apiServer"]["checks"][0]
    assert check["allowed"] is None
    assert "namespace labels unknown" in check["message"]


def _reserved_claim(consumers: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "busy", "namespace": "team", "uid": "uid-busy"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [
                {"resource": "pods", "name": f"user-{i}", "uid": f"uid-user-{i}"}
                for i in range(consumers)
            ],
        },
    }


POD_OF_BUSY = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "another", "namespace": "team"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "busy"}]},
    }
)


@pytest.mark.parametrize(
    ("served", "consumers", "fits"),
    [("v1alpha3", 32, False), ("v1", 32, True), ("v1", 256, False), ("v1", 255, True)],
)
def test_reserved_for_limit_depends_on_the_served_version(small, served, consumers, fits) -> None:
    """A claim reserved for the limit (32 for alpha versions, 256 after) takes no other pod."""
    load_objects([_reserved_claim(consumers)])
    SyncState.objects.create(kind="ResourceClaim", served_version=served)
    answer = what_if(POD_OF_BUSY, use_cache=False)
    assert answer["pods"][0]["fits"] is fits
    assert answer["fits"] is fits
    if fits:
        # An allocated claim pins the pod to its node.
        assert answer["pods"][0]["node"] == "node-a"


def test_two_pods_reaching_the_limit(small) -> None:
    """Pods of one input count as consumers in turn: the one past the limit fails."""
    load_objects([_reserved_claim(30)])
    SyncState.objects.create(kind="ResourceClaim", served_version="v1alpha3")
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "team"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "busy"}]},
        }
        for i in range(3)
    ]
    answer = what_if(yaml.safe_dump_all(pods), use_cache=False)
    assert [p["fits"] for p in answer["pods"]] == [True, True, False]
    assert "maximum of 32" in answer["pods"][2]["reasons"][0]


def _quota(name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": {k: "0" for k in hard}},
    }


def test_scoped_quotas_do_not_limit_claims(small) -> None:
    """Quota scopes never match ResourceClaims upstream, so a scoped quota is not applied."""
    key = "count/resourceclaims.resource.k8s.io"
    load_objects(
        [
            _quota("scoped", {key: "0"}, scopes=["BestEffort"]),
            _quota(
                "selected",
                {key: "0"},
                scopeSelector={
                    "matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}
                    ]
                },
            ),
            _quota("plain", {key: "5"}),
        ]
    )
    text = yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "team"},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": DRIVER}}]}
            },
        }
    )
    quota = what_if(text, use_cache=False)["quota"]
    assert quota["allowed"] is True
    assert {i["quota"] for i in quota["items"]} == {"plain"}
    assert {n["quota"] for n in quota["notApplied"]} == {"scoped", "selected"}
