"""A what-if job never stays "running": unexpected failures end it as failed."""

from __future__ import annotations

import pytest

import claims.whatif.request
from tests.claims.whatif.helpers import URL, claim_yaml


@pytest.mark.django_db
def test_unexpected_error_marks_the_job_failed(demo, api, monkeypatch, caplog) -> None:
    """A bug inside what-if ends the job failed with a generic message, and is logged."""

    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(claims.whatif.request, "what_if", broken)
    created = api.post(URL + "jobs/", {"yaml": claim_yaml()}, format="json")
    assert created.status_code == 202
    job = api.get(f"{URL}jobs/{created.json()['id']}/").json()
    assert job["status"] == "failed"
    assert job["error"]["detail"] == "internal error; see the worker log"
    assert any("simulated bug" in (r.exc_text or "") for r in caplog.records)
