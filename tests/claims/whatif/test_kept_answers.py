"""Answers kept in the process (their JSON bytes): a repeated question is served from them,
equal to the computed answer, never across a cluster change, and the number and bytes kept
stay bounded."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from claims.whatif import service
from claims.whatif.service import forget_simulations, what_if
from inventory.sync import upsert_events
from tests.claims.whatif.helpers import claim_yaml


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in {"elapsedSeconds", "cached"}}


def test_repeated_question_served_from_the_kept_answer(demo) -> None:
    """With the shared cache emptied, the process's kept answer still answers, and equals the
    answer computed the first time; forgetting it computes again."""
    source = claim_yaml(name="kept", count=2)
    first = what_if(source)
    assert first["cached"] is False
    cache.clear()
    again = what_if(source)
    assert again["cached"] is True
    assert _comparable(again) == _comparable(first)
    # The copy handed out is the caller's: changing its top level leaves the kept one alone.
    again["summary"] = None
    assert what_if(source)["summary"] == first["summary"]
    forget_simulations()
    cache.clear()
    assert what_if(source)["cached"] is False


def test_kept_answer_not_served_after_a_change(demo) -> None:
    """A write to the cluster moves the fingerprint: the kept answer is not served."""
    source = claim_yaml(name="changed", count=2)
    what_if(source)
    node = demo["Node"][0]
    relabeled = {
        **node,
        "metadata": {
            **node["metadata"],
            "resourceVersion": "999999",
            "labels": {**node["metadata"].get("labels", {}), "changed": "yes"},
        },
    }
    upsert_events("Node", [(relabeled, None)], publish=False)
    assert what_if(source)["cached"] is False


def test_kept_answers_bounded(demo, monkeypatch) -> None:
    """Past the bound in number or in bytes, the least recently asked answers go."""
    monkeypatch.setattr(service, "_ANSWERS_KEPT", 3)
    for index in range(5):
        what_if(claim_yaml(name=f"bounded-{index}", count=1))
    assert len(service._answers) == 3
    size = max(map(len, service._answers.values()))
    monkeypatch.setattr(service, "_ANSWERS_KEPT_BYTES", 2 * size)
    what_if(claim_yaml(name="bounded-last", count=1))
    assert len(service._answers) <= 2
    assert sum(map(len, service._answers.values())) <= 2 * size
