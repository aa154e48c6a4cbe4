"""What-if input gets the API server's request defaults before it reaches the allocator."""

from __future__ import annotations

import pytest
import yaml

from tests.claims.whatif.helpers import URL, answer_keys, claim_yaml


@pytest.mark.django_db
def test_claim_without_mode_or_count_is_answered_as_exact_count_one(demo, api) -> None:
    """A request leaving out allocationMode and count is one device, as the API server stores it."""
    explicit = yaml.safe_load(claim_yaml(count=1))
    bare = yaml.safe_load(claim_yaml(count=1))
    exactly = bare["spec"]["devices"]["requests"][0]["exactly"]
    del exactly["allocationMode"], exactly["count"]
    answers = []
    for claim in (explicit, bare):
        response = api.post(URL, {"yaml": yaml.safe_dump(claim)}, format="json")
        assert response.status_code == 200, response.content
        answers.append(response.json()["nodes"])
    assert any(entry["fits"] for entry in answers[0])
    assert [e["fits"] for e in answers[1]] == [e["fits"] for e in answers[0]]
    assert [answer_keys(e) for e in answers[1]] == [answer_keys(e) for e in answers[0]]
