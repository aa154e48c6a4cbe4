"""Answers kept in the process (their JSON bytes): a repeated question is served from them,
equal to the computed answer, never across a cluster change, and the number and bytes kept
stay bounded."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from claims.whatif.kept import KeptAnswers
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


def test_kept_answers_bounded() -> None:
    """Past the bound in number or in bytes, the least recently asked answers go; one answer
    over the byte bound is not kept."""
    kept = KeptAnswers(limit=3, max_bytes=100)
    for index in range(5):
        kept.keep(f"k{index}", b"x" * 10)
    assert len(kept) == 3
    assert kept.get("k0") is None
    assert kept.get("k2") == b"x" * 10  # now the most recently asked
    kept.keep("big", b"y" * 80)
    assert kept.size() <= 100
    # 110 bytes: the least recently asked (k3) goes, k2 (asked since) stays.
    assert kept.get("k3") is None
    assert kept.get("k2") == b"x" * 10
    assert kept.get("big") == b"y" * 80
    kept.keep("huge", b"z" * 101)
    assert kept.get("huge") is None
