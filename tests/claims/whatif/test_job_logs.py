"""A what-if job's request (the user's YAML) is never logged at INFO; at DEBUG only, cut short."""

from __future__ import annotations

import logging

import pytest

from claims.whatif.jobs import LOG_CHARS
from tests.claims.whatif.helpers import URL, claim_yaml

MARKER = "yaml-that-stays-out-of-the-logs"


def job_yaml() -> str:
    """A claim whose YAML starts with the marker and runs far past what DEBUG keeps."""
    return f"# {MARKER}\n# {'x' * 5000}\n" + claim_yaml()


@pytest.mark.django_db
def test_a_jobs_request_is_logged_at_debug_only_cut_short(demo, api, caplog) -> None:
    """With every logger at DEBUG, the YAML is in one line only, a DEBUG line of at most
    LOG_CHARS of the request."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="claims")
    created = api.post(URL + "jobs/", {"yaml": job_yaml()}, format="json")
    assert created.status_code == 202
    [line] = [r for r in caplog.records if MARKER in r.getMessage()]
    assert line.name == "claims.whatif.jobs"
    assert line.levelno == logging.DEBUG
    message = line.getMessage()
    assert created.json()["id"] in message
    assert len(message) < LOG_CHARS + 100 and "x" * 5000 not in message
