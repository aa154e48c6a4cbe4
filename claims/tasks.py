"""Celery tasks of the claims app: what-if jobs and pending-claim diagnoses.

The tasks only translate: `run_what_if_job` runs `claims.whatif.jobs.run_job` (the job store
lives there; `queue_what_if_job` hands a job to a worker, or to this process's job threads when
Celery has no worker), `refresh_diagnoses` runs `claims.whatif.diagnosis.diagnose_all`. The
sync asks for diagnoses with `schedule_diagnoses()` after a batch, which debounces: at most
one queued run per `DIAGNOSIS_DEBOUNCE_SECONDS`.
"""

from __future__ import annotations

from typing import Any

from celery import current_app, shared_task
from django.core.cache import cache

from claims.whatif.diagnosis import diagnose_all
from claims.whatif.jobs import JOB_SOFT_TIME_LIMIT, LOCAL_JOBS, run_job
from inventory.clusters import in_default_cluster

DIAGNOSIS_DEBOUNCE_SECONDS = 5
_DEBOUNCE_KEY = "whatif:diagnoses:queued"


@shared_task(
    ignore_result=True, soft_time_limit=JOB_SOFT_TIME_LIMIT, time_limit=JOB_SOFT_TIME_LIMIT + 30
)
@in_default_cluster
def run_what_if_job(job_id: str, request: dict[str, Any]) -> str:
    """Answer one what-if job; progress and the outcome go to the job document."""
    return run_job(job_id, request)


def queue_what_if_job(job_id: str, request: dict[str, Any]) -> None:
    """Queue a job for a Celery worker; without one (tasks run eagerly, no Redis), for this
    process's job threads, so that the request that queued it is answered at once."""
    if current_app.conf.task_always_eager:
        LOCAL_JOBS.submit(job_id, request)
    else:
        # argsrepr: what Celery shows of the arguments (its logs, events, monitoring) names the
        # job only; the request holds the user's YAML (logged at DEBUG by run_job, cut short).
        run_what_if_job.apply_async((job_id, request), argsrepr=repr((job_id, "<request>")))


@shared_task(ignore_result=True)
@in_default_cluster
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
