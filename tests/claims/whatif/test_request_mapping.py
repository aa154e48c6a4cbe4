"""One mapping from a request (HTTP body or job payload) to `what_if`, errors included."""

from __future__ import annotations

import pytest

from claims.whatif.inputs import WhatIfError
from claims.whatif.request import run_request
from tests.claims.whatif.helpers import URL, claim_yaml


def test_the_job_and_the_view_answer_alike(small, api) -> None:
    """The synchronous answer and the job's result agree, gang option included."""
    body = {"yaml": claim_yaml(count=1, namespace="team"), "gang": "true"}
    direct = api.post(URL, body, format="json").json()
    created = api.post(URL + "jobs/", body, format="json").json()
    job = api.get(f"{URL}jobs/{created['id']}/").json()
    assert job["status"] == "done"
    assert job["result"]["gang"] is direct["gang"] is True
    assert job["result"]["placements"] == direct["placements"]


def test_input_too_complex_is_the_same_error_for_both(small, api, monkeypatch) -> None:
    """A RecursionError while answering becomes a WhatIfError on the yaml field."""
    import claims.whatif.request

    def deep(*args, **kwargs):
        raise RecursionError("deep")

    monkeypatch.setattr(claims.whatif.request, "what_if", deep)
    with pytest.raises(WhatIfError) as error:
        run_request({"yaml": "x"})
    assert error.value.field == "yaml"
    response = api.post(URL, {"yaml": "x"}, format="json")
    assert response.status_code == 400
    assert response.json() == error.value.as_dict()
    # A job checks its input first: "x" is refused at once; valid input that turns out too
    # complex while answering ends the job failed with the same error.
    refused = api.post(URL + "jobs/", {"yaml": "x"}, format="json")
    assert refused.status_code == 400
    created = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json").json()
    job = api.get(f"{URL}jobs/{created['id']}/").json()
    assert job["status"] == "failed" and job["error"] == error.value.as_dict()


def test_a_job_with_bad_input_is_refused_before_it_is_queued(small, api) -> None:
    """Bad job input is a 400 naming the field, not a 202 and a failed job later."""
    response = api.post(URL + "jobs/", {"yaml": "kind: Pod\nmetadata: x\n"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"].startswith("yaml")


def test_a_user_may_have_only_a_few_unfinished_jobs(small, api, settings, monkeypatch) -> None:
    """Past WHATIF_JOBS_PER_USER queued or running jobs a user gets 429 until one finishes."""
    import claims.api.whatif

    settings.WHATIF_JOBS_PER_USER = 2
    # Nothing runs the queued jobs: they stay unfinished.
    monkeypatch.setattr(claims.api.whatif, "queue_what_if_job", lambda *args, **kwargs: None)
    first = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json")
    second = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json")
    assert first.status_code == second.status_code == 202
    third = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json")
    assert third.status_code == 429
    assert "at most 2" in third.json()["detail"]


def test_a_bad_gang_value_names_the_field(small, api) -> None:
    """gang must be true or false."""
    response = api.post(URL, {"yaml": claim_yaml(), "gang": "sometimes"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "gang"
