"""A finished what-if job keeps an answer of bounded size, saying what it cut."""

from __future__ import annotations

import copy
import json

import orjson

from claims.whatif.trim import trim_answer
from tests.claims.whatif.helpers import URL, claim_yaml

LIMIT = 64 * 1024


def big_answer() -> dict:
    """An answer shaped like a large cluster's: long node, placement and pod lists."""
    devices = [{"driver": "gpu.example.com", "pool": "p", "device": f"gpu-{d}"} for d in range(8)]
    copies = [{"node": f"n-{n}", "copies": 2} for n in range(3000)]
    return {
        "fits": True,
        "nodes": [{"node": f"node-{n:04}", "fits": True, "devices": devices} for n in range(2000)],
        "placements": [{"node": f"node-{n:04}", "devices": devices[:2]} for n in range(1500)],
        "headroom": {"placed": 3000, "placements": copies},
        "summary": {"nodesChecked": 2000, "nodesFit": 2000, "headroom": 3000},
        "reasons": [],
        "fingerprint": "abc",
    }


def test_a_small_answer_is_kept_whole() -> None:
    """An answer under the limit is returned as it is."""
    answer = {"fits": True, "nodes": [{"node": "a"}, {"node": "b"}]}
    assert trim_answer(answer, max_bytes=LIMIT) is answer


def test_a_big_answer_is_cut_to_the_limit_keeping_first_entries() -> None:
    """Long lists keep their first entries; the result fits; the original is untouched."""
    answer = big_answer()
    original = copy.deepcopy(answer)
    trimmed = trim_answer(answer, max_bytes=LIMIT)
    assert answer == original
    assert len(orjson.dumps(trimmed)) <= LIMIT
    assert trimmed["trimmed"]["bytes"] == len(orjson.dumps(original)) > LIMIT
    assert trimmed["summary"] == original["summary"] and trimmed["fits"] is True
    for path, counts in trimmed["trimmed"]["lists"].items():
        whole = original
        cut = trimmed
        for key in path.split("."):
            whole, cut = whole[key], cut[key]
        assert counts["total"] == len(whole) > counts["kept"] == len(cut) >= 1
        assert cut == whole[: len(cut)]
    assert "nodes" in trimmed["trimmed"]["lists"]


def test_an_answer_with_nothing_to_cut_keeps_its_summary() -> None:
    """One huge value that no list cut can shrink leaves the summary and a note."""
    answer = {"fits": False, "summary": {"nodesChecked": 1}, "reasons": ["x" * (2 * LIMIT)]}
    trimmed = trim_answer(answer, max_bytes=LIMIT)
    assert len(orjson.dumps(trimmed)) <= LIMIT
    assert trimmed["summary"] == answer["summary"] and "reasons" not in trimmed
    assert "only its summary" in trimmed["trimmed"]["message"]


def test_a_job_keeps_at_most_the_configured_bytes(demo, api, settings) -> None:
    """A headroom job over the demo cluster keeps a cut answer within the setting."""
    limit = 8 * 1024  # the 20-node demo's answer is some 16 KB
    settings.WHATIF_JOB_RESULT_MAX_BYTES = limit
    body = {"yaml": claim_yaml(count=1), "count": "max"}
    direct = api.post(URL, body, format="json").json()
    assert len(json.dumps(direct)) > limit  # the whole answer would not fit
    created = api.post(URL + "jobs/", body, format="json").json()
    job = api.get(f"{URL}jobs/{created['id']}/").json()
    assert job["status"] == "done"
    result = job["result"]
    assert len(orjson.dumps(result)) <= limit
    assert result["trimmed"]["maxBytes"] == limit
    assert result["nodes"] == direct["nodes"][: len(result["nodes"])]
    assert result["summary"] == direct["summary"]
