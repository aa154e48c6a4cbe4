"""Without a Celery worker, a what-if job is answered 202 at once and runs on a bounded number
of job threads of the web process, never inside the request that queued it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import claims.whatif.jobs
from claims.whatif.jobs import LOCAL_JOBS, get_job, unfinished_jobs
from tests.claims.whatif.helpers import URL, claim_yaml

JOBS = URL + "jobs/"
# A wait for what must happen, never a measurement.
WAIT = 60.0


class Gate:
    """Stands in for `run_request`: each call says it started, then waits to be let through."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        self.threads: list[str] = []

    def __call__(self, request, *, progress=None, budget=None) -> dict[str, object]:
        self.threads.append(threading.current_thread().name)
        self.started.release()
        assert self.release.wait(WAIT), "never let through"
        return {"fits": True, "namespace": request.get("namespace")}


@pytest.fixture
def gate(settings, monkeypatch) -> Iterator[Gate]:
    """One job thread, jobs through the gate; every job has ended when the test ends."""
    settings.WHATIF_JOB_THREADS = 1
    settings.WHATIF_JOBS_PER_USER = 10
    gate = Gate()
    monkeypatch.setattr(claims.whatif.jobs, "run_request", gate)
    yield gate
    gate.release.set()
    wait_until(lambda: LOCAL_JOBS.unfinished() == 0)


def wait_until(check) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.01)


def test_a_job_is_answered_at_once_and_runs_on_a_job_thread(small, api, gate) -> None:
    """The 202 comes back while the job is still held at the gate, on a job thread; let
    through, the job ends done with its answer."""
    created = api.post(JOBS, {"yaml": claim_yaml(), "namespace": "team-b"}, format="json")
    assert created.status_code == 202
    assert created.json()["status"] in ("queued", "running")
    assert gate.started.acquire(timeout=WAIT)
    assert gate.threads[0].startswith("whatif-job")
    job_id = created.json()["id"]
    assert get_job(job_id)["status"] == "running"
    gate.release.set()
    wait_until(lambda: get_job(job_id)["status"] == "done")
    assert get_job(job_id)["result"] == {"fits": True, "namespace": "team-b"}


def test_the_threads_and_the_backlog_are_bounded(
    small, api, viewer_user, gate, monkeypatch
) -> None:
    """One thread and a backlog of one: a third job waiting would be one too many (429), and
    a refused job leaves nothing behind; once they end, a job is taken again."""
    monkeypatch.setattr(claims.whatif.jobs, "LOCAL_BACKLOG", 1)
    body = {"yaml": claim_yaml()}
    first = api.post(JOBS, body, format="json")
    second = api.post(JOBS, body, format="json")
    assert (first.status_code, second.status_code) == (202, 202)
    assert gate.started.acquire(timeout=WAIT)
    third = api.post(JOBS, body, format="json")
    assert third.status_code == 429
    assert LOCAL_JOBS.unfinished() == 2
    assert len(unfinished_jobs(str(viewer_user.pk))) == 2
    assert get_job(second.json()["id"])["status"] == "queued"
    assert len(gate.threads) == 1
    gate.release.set()
    wait_until(lambda: LOCAL_JOBS.unfinished() == 0)
    assert {get_job(r.json()["id"])["status"] for r in (first, second)} == {"done"}
    assert api.post(JOBS, body, format="json").status_code == 202
