"""Celery tasks of the claims app: asynchronous what-if jobs and pending-claim diagnoses.

A what-if job keeps its state in the Django cache under its id (queued, running with progress,
done with the answer (cut to settings.WHATIF_JOB_RESULT_MAX_BYTES, `claims.whatif.trim`),
failed with the field at fault) and announces each update on the live layer
(`whatif` topic, the job id). `refresh_diagnoses` recomputes the diagnoses of waiting claims; the
sync asks for it with `schedule_diagnoses()` after a batch, which debounces: at most one queued
run per `DIAGNOSIS_DEBOUNCE_SECONDS`.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from celery import current_app, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache

from claims.whatif.diagnosis import diagnose_all
from claims.whatif.inputs import WhatIfError
from claims.whatif.options import REQUEST_KEYS
from claims.whatif.request import run_request
from claims.whatif.trim import trim_answer
from dashboard.live import publish_changes

log = logging.getLogger(__name__)

JOB_CACHE_SECONDS = 3600
DIAGNOSIS_DEBOUNCE_SECONDS = 5
_JOB_PREFIX = "whatif:job:"
_DEBOUNCE_KEY = "whatif:diagnoses:queued"
_PROGRESS_INTERVAL = 0.5


def job_key(job_id: str) -> str:
    """The cache key under which a what-if job's document is stored."""
    return _JOB_PREFIX + job_id


def get_job(job_id: str) -> dict[str, Any] | None:
    """The stored job document, or None when unknown or expired."""
    job = cache.get(job_key(job_id))
    return job if isinstance(job, dict) else None


def _store(job: dict[str, Any]) -> None:
    cache.set(job_key(job["id"]), job, JOB_CACHE_SECONDS)
    publish_changes({"whatif": [job["id"]]})


class TooManyJobs(Exception):
    """The user already has as many unfinished what-if jobs as settings allow."""


def _owner_key(owner: str) -> str:
    return f"dra-dashboard:whatif-jobs:{owner}"


def unfinished_jobs(owner: str) -> list[str]:
    """Ids of the owner's jobs that are queued or running (expired ones drop out)."""
    ids = cache.get(_owner_key(owner)) or []
    alive = []
    for job_id in ids:
        job = get_job(job_id)
        if job is not None and job["status"] in ("queued", "running"):
            alive.append(job_id)
    return alive


def create_job(request: dict[str, Any], *, owner: str = "") -> dict[str, Any]:
    """Store a queued job for `request` and queue it (run inline without a worker).

    Raises TooManyJobs when `owner` already has settings.WHATIF_JOBS_PER_USER unfinished jobs.
    """
    if owner:
        alive = unfinished_jobs(owner)
        if len(alive) >= settings.WHATIF_JOBS_PER_USER:
            raise TooManyJobs(
                f"{len(alive)} what-if jobs of yours are still queued or running "
                f"(at most {settings.WHATIF_JOBS_PER_USER}); wait for one to finish"
            )
    job = {
        "id": uuid.uuid4().hex,
        "status": "queued",
        "progress": {"done": 0, "total": 0, "phase": ""},
        "result": None,
        "error": None,
        "created": time.time(),
    }
    _store(job)
    if owner:
        cache.set(_owner_key(owner), [*alive, job["id"]], JOB_CACHE_SECONDS)
    run_what_if_job.delay(job["id"], {k: request.get(k) for k in REQUEST_KEYS})
    return get_job(job["id"]) or job


# A job that outlives this is stopped and reported failed, never left "running".
JOB_SOFT_TIME_LIMIT = 300


@shared_task(
    ignore_result=True, soft_time_limit=JOB_SOFT_TIME_LIMIT, time_limit=JOB_SOFT_TIME_LIMIT + 30
)
def run_what_if_job(job_id: str, request: dict[str, Any]) -> str:
    """Answer one what-if job; progress and the outcome go to the job document."""

    job = get_job(job_id)
    if job is None:
        log.info("what-if job %s expired before it ran", job_id)
        return "gone"
    job["status"] = "running"
    _store(job)
    last = [0.0]

    def progress(done: int, total: int, phase: str) -> None:
        now = time.monotonic()
        if now - last[0] < _PROGRESS_INTERVAL and done < total:
            return
        last[0] = now
        job["progress"] = {"done": done, "total": total, "phase": phase}
        _store(job)

    try:
        answer = run_request(request, progress=progress, budget=settings.WHATIF_JOB_BUDGET_SECONDS)
        # Kept for JOB_CACHE_SECONDS: bounded in size, whatever the cluster and the question.
        job["result"] = trim_answer(answer, max_bytes=settings.WHATIF_JOB_RESULT_MAX_BYTES)
        job["status"] = "done"
    except WhatIfError as exc:
        job["status"] = "failed"
        job["error"] = exc.as_dict()
    except SoftTimeLimitExceeded:
        job["status"] = "failed"
        job["error"] = {"field": "", "detail": f"took longer than {JOB_SOFT_TIME_LIMIT} s"}
    except Exception:
        # A bug or a database outage: the job says so instead of staying "running".
        log.exception("what-if job %s failed", job_id)
        job["status"] = "failed"
        job["error"] = {"field": "", "detail": "internal error; see the worker log"}
    _store(job)
    return job["status"]


@shared_task(ignore_result=True)
def refresh_diagnoses(force: bool = False) -> dict[str, int]:
    """Recompute the diagnoses of pending claims pods wait for (skipped if nothing changed)."""

    cache.delete(_DEBOUNCE_KEY)
    return diagnose_all(force=force)


def schedule_diagnoses() -> bool:
    """Queue `refresh_diagnoses` unless one is already queued; call after a sync batch commits.

    Returns True if a run was queued. Without a worker (eager Celery) nothing is queued: the
    sync must not pay for diagnoses inline; the beat schedule (or a worker) catches up.
    """
    if current_app.conf.task_always_eager:
        return False
    if not cache.add(_DEBOUNCE_KEY, 1, DIAGNOSIS_DEBOUNCE_SECONDS * 4):
        return False
    refresh_diagnoses.apply_async(countdown=DIAGNOSIS_DEBOUNCE_SECONDS)
    return True
