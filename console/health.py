"""Liveness and readiness endpoints for load balancers, Docker and Kubernetes probes.

`/healthz` answers as long as the process serves requests and touches nothing else, so a database
outage never gets the web processes restarted. `/readyz` checks what serving needs: the database,
Redis when one is configured, and fresh watchers (every served kind's SyncState heartbeat within
settings.READY_MAX_WATCH_AGE seconds). Both are public, cheap (one `SELECT 1`, one PING, one small
query) and answer JSON listing each check; any failing check makes `/readyz` answer 503.
`/readyz` also carries the cluster's freshness (`inventory.freshness`), as the header shows it.

A failing `/readyz` is logged once per change, not once per probe: a WARNING naming the failing
checks when the set of failing checks changes, an INFO line when all pass again. (Django would
log every 503 at ERROR: a probe every 10 s failing for an hour was 360 ERROR lines.) Each web
process keeps its own last state.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.utils.log import log_response
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from inventory.freshness import cluster_freshness
from inventory.models import SyncState

log = logging.getLogger(__name__)

# Probes must answer well before a probe's own timeout (Kubernetes defaults to one second).
REDIS_TIMEOUT_SECONDS = 0.5


@dataclass(frozen=True)
class Check:
    """The outcome of one readiness check, as listed in the JSON body."""

    name: str
    ok: bool
    detail: str


def database_connection() -> BaseDatabaseWrapper:
    """The connection the database check uses (tests point it at an unreachable server)."""
    return connections[DEFAULT_DB_ALIAS]


def check_database() -> Check:
    connection = database_connection()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means not ready, never a 500
        return Check("database", False, f"{connection.vendor}: {_first_line(exc)}")
    return Check("database", True, f"{connection.vendor}: reachable")


def check_database_writable() -> Check:
    """The database takes a write: a read-only replica or a locked SQLite file is not ready.

    Rewrites one existing row to itself inside a transaction that is rolled back, so the
    database really asks for a write lock and nothing changes.
    """
    connection = database_connection()
    try:
        with transaction.atomic(using=connection.alias):
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE django_migrations SET app = app "
                    "WHERE id = (SELECT MIN(id) FROM django_migrations)"
                )
            transaction.set_rollback(True, using=connection.alias)
    except Exception as exc:  # read-only, locked, permissions: not ready, never a 500
        return Check("database-write", False, f"{connection.vendor}: {_first_line(exc)}")
    return Check("database-write", True, f"{connection.vendor}: writable")


def check_sync(*, enforce: bool, now: datetime | None = None) -> Check:
    """No served kind is stale: its cursor is valid for the cluster and was verified recently."""
    if not cluster_configured():
        return Check("sync", True, "no cluster configured: nothing is synced")
    now = now or timezone.now()
    try:
        states = list(SyncState.objects.order_by("kind"))
        freshness = cluster_freshness(now=now)
    except Exception as exc:
        return Check("sync", False, f"cannot read the sync state: {_first_line(exc)}")
    stale = [s.kind for s in states if s.is_stale(now=now)]
    failing = [s.kind for s in states if s.health == "error"]
    not_served = [s.kind for s in states if not s.served]
    detail = f"{len(states) - len(not_served)} served kinds"
    if not_served:
        detail += f", {len(not_served)} not served (fine)"
    problems = []
    if stale:
        problems.append(
            f"stale (cursor not valid or not verified within "
            f"{int(SyncState.STALE_AFTER.total_seconds())}s): {', '.join(stale)}"
        )
    if failing:
        problems.append(f"failing: {', '.join(failing)}")
    if not problems:
        return Check("sync", True, detail + ", all current")
    message = f"{detail}; " + "; ".join(problems)
    # What the header shows, in the same words (inventory/freshness.py).
    message += f"; freshness: {freshness.state}" + (f" ({freshness.why})" if freshness.why else "")
    if not enforce:
        return Check("sync", True, message + " (not enforced)")
    return Check("sync", False, message)


def check_redis(url: str) -> Check:
    if not url:
        return Check("redis", True, "not configured (in-memory channel layer, inline tasks)")
    import redis

    client = redis.Redis.from_url(
        url, socket_connect_timeout=REDIS_TIMEOUT_SECONDS, socket_timeout=REDIS_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except Exception as exc:  # connection refused, timeout, auth: all mean not ready
        return Check("redis", False, _first_line(exc))
    finally:
        client.close()
    return Check("redis", True, "reachable")


def cluster_configured() -> bool:
    return bool(settings.KUBECONFIG or settings.KUBE_IN_CLUSTER)


def check_watchers(*, max_age: int, now: datetime | None = None) -> Check:
    """Every served kind's watcher heartbeat is at most `max_age` seconds old (0: not enforced)."""

    if not cluster_configured():
        return Check("watchers", True, "no cluster configured: nothing is synced")
    now = now or timezone.now()
    try:
        states = list(SyncState.objects.filter(served=True).values_list("kind", "heartbeat_at"))
    except Exception as exc:  # not migrated yet, or the database went away after SELECT 1
        return Check("watchers", False, f"cannot read the sync state: {_first_line(exc)}")
    if not states:
        if max_age == 0:
            return Check("watchers", True, "no watcher has reported yet (not enforced)")
        return Check("watchers", False, "no watcher has reported yet")
    stale = []
    for kind, heartbeat_at in sorted(states):
        if heartbeat_at is None:
            stale.append(f"{kind} (never)")
        elif max_age and now - heartbeat_at > timedelta(seconds=max_age):
            stale.append(f"{kind} ({int((now - heartbeat_at).total_seconds())}s ago)")
    if stale:
        return Check("watchers", False, f"heartbeat older than {max_age}s: {', '.join(stale)}")
    bound = f"within {max_age}s" if max_age else "not enforced"
    return Check("watchers", True, f"{len(states)} served kinds, heartbeats {bound}")


def readiness() -> list[Check]:
    """Run every readiness check; the watcher check needs the database and is skipped without it."""
    database = check_database()
    checks = [database, check_redis(settings.REDIS_URL)]
    if database.ok:
        enforce = settings.READY_MAX_WATCH_AGE != 0
        checks.append(check_database_writable())
        checks.append(check_watchers(max_age=settings.READY_MAX_WATCH_AGE))
        checks.append(check_sync(enforce=enforce))
    else:
        for name in ("database-write", "watchers", "sync"):
            checks.append(Check(name, False, "not checked: the database is unreachable"))
    return checks


class ReadinessLog:
    """Logs readiness when it changes: the names of the failing checks, as last seen here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: tuple[str, ...] = ()  # a process starts out assumed ready

    def note(self, checks: list[Check]) -> bool:
        """Log the outcome if the failing checks differ from last time; True if it logged."""
        failing = tuple(check.name for check in checks if not check.ok)
        with self._lock:
            if failing == self._failing:
                return False
            self._failing = failing
        if failing:
            details = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
            log.warning("not ready: %s", details, extra={"failing": list(failing)})
        else:
            log.info("ready again: every check passes")
        return True

    def reset(self) -> None:
        with self._lock:
            self._failing = ()


READINESS_LOG = ReadinessLog()


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. Touches neither the database nor Redis."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when every check passes, 503 with the failing checks otherwise."""
    checks = readiness()
    ready = all(check.ok for check in checks)
    body: dict[str, Any] = {
        "status": "ready" if ready else "not ready",
        "checks": [asdict(check) for check in checks],
    }
    if checks[0].ok:
        body["freshness"] = _freshness()
    READINESS_LOG.note(checks)
    response = JsonResponse(body, status=200 if ready else 503)
    if not ready:
        # Django logs each 5xx at ERROR unless the response was logged already; the line above
        # said it, once per change, so this probe's own line goes to DEBUG.
        log_response(
            "Not ready: %s", request.path, response=response, request=request, level="debug"
        )
    return response


def _freshness() -> dict[str, Any] | None:
    """The cluster's freshness as the header shows it (None when it cannot be read)."""
    try:
        return cluster_freshness().as_dict()
    except Exception:  # a probe never fails with a 500
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
