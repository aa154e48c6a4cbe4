"""What-if jobs: a request answered on a Celery worker, its state kept in the Django cache.

A job document is {id, status, progress, result, error, created}: queued, running with
progress, done with the answer (cut to settings.WHATIF_JOB_RESULT_MAX_BYTES, `trim`) or failed
with the field at fault. Each update is announced on the live layer (`whatif` topic, the job id).
`create_job` stores a queued job and hands it to the queue it is given (`claims.tasks`'s
`queue_what_if_job`: a Celery worker, or without one this process's `LOCAL_JOBS`); either
calls `run_job`, which answers through the same `run_request` as the REST view and the page.

Without a worker (no Redis: Celery runs tasks inline) a job must not run inside the request that
queued it, holding it for up to WHATIF_JOB_BUDGET_SECONDS: `LocalJobs` runs jobs on at most
settings.WHATIF_JOB_THREADS threads, with at most LOCAL_BACKLOG more waiting (past that, the
request is refused as too many jobs). 0 threads runs them inline (tests that read the outcome
at once).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.db import connections

from claims.whatif.inputs import JSON, WhatIfError
from claims.whatif.options import REQUEST_KEYS
from claims.whatif.request import run_request
from claims.whatif.trim import trim_answer
from dashboard.live import publish_changes
from inventory.clusters import in_default_cluster

__all__ = [
    "JOB_CACHE_SECONDS",
    "JOB_SOFT_TIME_LIMIT",
    "LOCAL_BACKLOG",
    "LOCAL_JOBS",
    "LocalJobs",
    "TooManyJobs",
    "create_job",
    "get_job",
    "job_key",
    "run_job",
    "unfinished_jobs",
]

log = logging.getLogger(__name__)

JOB_CACHE_SECONDS = 3600
# A job that outlives this is stopped and reported failed, never left "running".
JOB_SOFT_TIME_LIMIT = 300
_JOB_PREFIX = "whatif:job:"
_PROGRESS_INTERVAL = 0.5
# Jobs waiting for one of this process's job threads, at most (without a Celery worker).
LOCAL_BACKLOG = 16
# Characters of a job's request logged at DEBUG.
LOG_CHARS = 500

# queue(job_id, request): runs the job later (a worker, a job thread) or at once (inline); may
# raise TooManyJobs.
Queue = Callable[[str, JSON], object]


class TooManyJobs(Exception):
    """The user already has as many unfinished what-if jobs as settings allow."""


def job_key(job_id: str) -> str:
    """The cache key under which a what-if job's document is stored."""
    return _JOB_PREFIX + job_id


def get_job(job_id: str) -> JSON | None:
    """The stored job document, or None when unknown or expired."""
    job = cache.get(job_key(job_id))
    return job if isinstance(job, dict) else None


def _store(job: JSON) -> None:
    cache.set(job_key(job["id"]), job, JOB_CACHE_SECONDS)
    publish_changes({"whatif": [job["id"]]})


def owner_of(user: Any) -> str:
    """The owner a job is stored under: the submitting user's primary key."""
    return str(getattr(user, "pk", None) or "")


def job_owner(job_id: str) -> str | None:
    """Who submitted the job, or None when unknown or expired."""
    owner = cache.get(f"{job_key(job_id)}:owner")
    return owner if isinstance(owner, str) else None


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


def create_job(request: Mapping[str, Any], *, queue: Queue, owner: str = "") -> JSON:
    """Store a queued job for `request`, queue it, and return its document as it is then.

    Raises TooManyJobs when `owner` already has settings.WHATIF_JOBS_PER_USER unfinished jobs.
    """
    alive: list[str] = []
    if owner:
        alive = unfinished_jobs(owner)
        if len(alive) >= settings.WHATIF_JOBS_PER_USER:
            raise TooManyJobs(
                f"{len(alive)} what-if jobs of yours are still queued or running "
                f"(at most {settings.WHATIF_JOBS_PER_USER}); wait for one to finish"
            )
    job: JSON = {
        "id": uuid.uuid4().hex,
        "status": "queued",
        "progress": {"done": 0, "total": 0, "phase": ""},
        "result": None,
        "error": None,
        "created": time.time(),
    }
    cache.set(f"{job_key(job['id'])}:owner", owner, JOB_CACHE_SECONDS)
    _store(job)
    if owner:
        cache.set(_owner_key(owner), [*alive, job["id"]], JOB_CACHE_SECONDS)
    try:
        queue(job["id"], {key: request.get(key) for key in REQUEST_KEYS})
    except TooManyJobs:
        cache.delete(job_key(job["id"]))
        if owner:
            cache.set(_owner_key(owner), alive, JOB_CACHE_SECONDS)
        raise
    # A job run inline has run already: return what it came to.
    return get_job(job["id"]) or job


@in_default_cluster
def run_job(job_id: str, request: Mapping[str, Any]) -> str:
    """Answer one queued job; progress and the outcome go to its document. Returns the status
    ("gone" when the job expired before it ran)."""
    job = get_job(job_id)
    if job is None:
        log.info("what-if job %s expired before it ran", job_id)
        return "gone"
    if log.isEnabledFor(logging.DEBUG):
        # The request is the user's YAML, possibly megabytes: only at DEBUG, and cut short.
        text = json.dumps(dict(request), default=str)
        log.debug("what-if job %s request, %d chars: %.*s", job_id, len(text), LOG_CHARS, text)
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
    return str(job["status"])


class LocalJobs:
    """What-if jobs run by threads of this process, for when no Celery worker takes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0
        self._unfinished = 0

    def submit(self, job_id: str, request: JSON) -> None:
        """Start the job on a job thread, or queue it for the next free one; raises TooManyJobs
        when LOCAL_BACKLOG jobs already wait. With 0 threads the job runs here and now."""
        threads = int(settings.WHATIF_JOB_THREADS)
        if threads == 0:
            run_job(job_id, request)
            return
        with self._lock:
            if self._unfinished >= threads + LOCAL_BACKLOG:
                raise TooManyJobs(
                    f"{self._unfinished} what-if jobs are running or waiting on this server; "
                    "try again when some have finished"
                )
            if self._executor is None or self._threads != threads:
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = ThreadPoolExecutor(threads, thread_name_prefix="whatif-job")
                self._threads = threads
            self._unfinished += 1
            self._executor.submit(self._run, job_id, request)

    def _run(self, job_id: str, request: JSON) -> None:
        try:
            run_job(job_id, request)
        except Exception:
            log.exception("what-if job %s failed", job_id)
        finally:
            # A job thread outlives its job: it must not keep a connection open meanwhile.
            connections.close_all()
            with self._lock:
                self._unfinished -= 1

    def unfinished(self) -> int:
        """Jobs submitted here that have not ended yet (running or waiting)."""
        with self._lock:
            return self._unfinished


LOCAL_JOBS = LocalJobs()
