"""Assumed changes, what-if jobs and pending-claim diagnoses."""

from __future__ import annotations

import pytest

from claims.models import ResourceClaim
from claims.whatif.diagnosis import diagnose_all
from tests.claims.whatif.helpers import (
    URL,
    answer_keys,
    claim_object,
    claim_yaml,
    device_keys,
    direct,
)


def _node(answer: dict, name: str) -> dict:
    return next(n for n in answer["nodes"] if n["node"] == name)


@pytest.mark.django_db
def test_release_claim_matches_the_allocator_without_it(demo, api) -> None:
    """Releasing an allocated claim frees its devices, as the allocator sees it."""
    held = ResourceClaim.objects.filter(allocated_count__gt=0, classic=False).exclude(node_name="")
    claim = held.order_by("namespace", "name").first()
    text = claim_yaml(count=1)
    body = {
        "yaml": text,
        "nodes": [claim.node_name],
        "assume": [{"op": "release-claim", "claim": f"{claim.namespace}/{claim.name}"}],
    }
    answer = api.post(URL, body, format="json").json()

    def release(scenario):
        scenario["allocatedClaims"] = [
            c for c in scenario["allocatedClaims"] if c["metadata"]["uid"] != claim.uid
        ]

    expected = direct([claim_object(text)], mutate=release)[claim.node_name]
    assert _node(answer, claim.node_name)["fits"] == (expected["results"] is not None)
    if expected["results"]:
        assert answer_keys(_node(answer, claim.node_name)) == device_keys(expected["results"])
    assert answer["assumed"] == [f"claim {claim.namespace}/{claim.name} released"]


@pytest.mark.django_db
def test_remove_add_taint_and_drop(demo, api) -> None:
    """Removed nodes vanish, clones fit like their model, tainted or dropped devices do not."""
    text = claim_yaml(count=1)
    plain = api.post(URL, {"yaml": text}, format="json").json()
    model = next(n for n in plain["nodes"] if n["fits"])["node"]
    changed = api.post(
        URL,
        {
            "yaml": text,
            "assume": [
                {"op": "remove-node", "node": "node-0020"},
                {"op": "add-nodes", "like": model, "count": 2},
            ],
        },
        format="json",
    ).json()
    names = [n["node"] for n in changed["nodes"]]
    assert "node-0020" not in names
    clones = [n for n in changed["nodes"] if n["node"].startswith(f"{model}-clone-")]
    assert len(clones) == 2 and all(c["fits"] for c in clones)
    devices = sorted(
        {(d["driver"], d["pool"]) for d in _node(plain, model)["claims"][0]["devices"]}
    )
    driver, pool = devices[0]
    dropped = api.post(
        URL,
        {
            "yaml": text,
            "nodes": [model],
            "assume": [{"op": "drop-pool", "pool": f"{driver}/{pool}"}],
        },
        format="json",
    ).json()
    chosen = {d["pool"] for c in _node(dropped, model).get("claims") or [] for d in c["devices"]}
    assert pool not in chosen
    taints = [
        {"op": "taint-device", "device": f"{driver}/{pool}/{d['device']}", "taint": {"key": "t"}}
        for d in _node(plain, model)["claims"][0]["devices"]
    ]
    tainted = api.post(
        URL, {"yaml": text, "nodes": [model], "assume": taints}, format="json"
    ).json()
    picked = {d["device"] for c in _node(tainted, model).get("claims") or [] for d in c["devices"]}
    assert not picked & {d["device"] for d in _node(plain, model)["claims"][0]["devices"]}
    untainted = api.post(
        URL,
        {
            "yaml": text,
            "nodes": [model],
            "assume": [*taints, *({"op": "untaint-device", "device": t["device"]} for t in taints)],
        },
        format="json",
    ).json()
    assert _node(untainted, model)["claims"] == _node(plain, model)["claims"]


@pytest.mark.django_db
def test_job_runs_and_keeps_its_answer(demo, api) -> None:
    """A job (eager without Redis) ends done with the same answer as the synchronous call."""
    body = {"yaml": claim_yaml(), "nodes": ["node-0001", "node-0003"]}
    created = api.post(URL + "jobs/", body, format="json")
    assert created.status_code == 202
    job = api.get(f"{URL}jobs/{created.json()['id']}/").json()
    assert job["status"] == "done"
    direct_answer = api.post(URL, body, format="json").json()
    assert job["result"]["nodes"] == direct_answer["nodes"]
    assert api.get(f"{URL}jobs/unknown/").status_code == 404


@pytest.mark.django_db
def test_failed_job_names_the_field(demo, api) -> None:
    """A job with an unknown class fails with the field at fault."""
    created = api.post(URL + "jobs/", {"yaml": claim_yaml(device_class="nope")}, format="json")
    job = api.get(f"{URL}jobs/{created.json()['id']}/").json()
    assert job["status"] == "failed"
    assert "deviceClassName" in job["error"]["field"]


@pytest.mark.django_db
def test_diagnoses_of_waiting_claims(demo, api) -> None:
    """Pending claims that unbound pods wait for get a diagnosis that the claim API shows."""
    outcome = diagnose_all(force=True)
    diagnosed = ResourceClaim.objects.filter(diagnosis__isnull=False)
    assert outcome["claims"] == diagnosed.count() > 0
    assert all(c.state == "pending" for c in diagnosed)
    claim = diagnosed.exclude(classic=True).first()
    expected = direct([claim.obj])
    fits = any(e["results"] is not None for e in expected.values())
    assert claim.diagnosis["nodesFit"] == sum(1 for e in expected.values() if e["results"])
    if not fits:
        assert claim.diagnosis["best"] and claim.diagnosis["reasons"]
    detail = api.get(f"/api/claims/resource-claims/{claim.pk}/").json()
    assert detail["diagnosis"] == claim.diagnosis
    assert diagnose_all()["skipped"] == 1
