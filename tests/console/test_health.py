"""Tests for /healthz and /readyz: each readiness check passing and failing for real."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import ConnectionHandler
from django.test import Client
from django.utils import timezone

from console import health
from inventory.models import SyncState
from tests.paths import free_port

# A served kind whose data the server confirmed a moment ago: not stale.
CURRENT = {"resource_version": "100", "cursor_valid": True}


def checks_of(response) -> dict[str, dict[str, object]]:
    return {check["name"]: check for check in response.json()["checks"]}


@pytest.fixture
def unreachable_database() -> Iterator[BaseDatabaseWrapper]:
    """A PostgreSQL connection to a port where no server listens."""
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "dashboard",
                "USER": "dashboard",
                "PASSWORD": "unused",
                "HOST": "127.0.0.1",
                "PORT": str(free_port()),
                "OPTIONS": {"connect_timeout": 2},
            }
        }
    )
    connection = handler["default"]
    yield connection
    connection.close()


def test_healthz_answers_without_touching_the_database() -> None:
    """/healthz is 200 with no database access allowed (no `db` fixture: access would raise)."""
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_is_public_and_get_only(db) -> None:
    """/healthz needs no login, answers HEAD and refuses POST."""
    assert Client().get("/healthz").status_code == 200
    assert Client().head("/healthz").status_code == 200
    assert Client().post("/healthz").status_code == 405


def test_readyz_ready_without_cluster_says_so(db, client, settings) -> None:
    """With no cluster configured, /readyz is ready and says nothing is synced."""
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    response = client.get("/readyz")
    assert response.status_code == 200
    checks = checks_of(response)
    assert response.json()["status"] == "ready"
    assert checks["database"]["ok"] is True
    assert checks["redis"] == {
        "name": "redis",
        "ok": True,
        "detail": "not configured (in-memory channel layer, inline tasks)",
    }
    assert checks["watchers"]["ok"] is True
    assert "no cluster configured" in checks["watchers"]["detail"]


def test_readyz_fails_when_database_is_unreachable(
    db, client, monkeypatch, unreachable_database
) -> None:
    """A database check against a server that is not there makes /readyz 503."""
    monkeypatch.setattr(health, "database_connection", lambda: unreachable_database)
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = checks_of(response)
    assert response.json()["status"] == "not ready"
    assert checks["database"]["ok"] is False
    assert checks["database"]["detail"].startswith("postgresql: OperationalError")
    assert checks["watchers"] == {
        "name": "watchers",
        "ok": False,
        "detail": "not checked: the database is unreachable",
    }


def test_readyz_fails_when_configured_redis_is_unreachable(db, client, settings) -> None:
    """REDIS_URL pointing at a closed port makes /readyz 503 with the redis check failing."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = checks_of(response)
    assert checks["redis"]["ok"] is False
    assert checks["redis"]["detail"].startswith("ConnectionError")
    assert checks["database"]["ok"] is True


def test_readyz_passes_with_reachable_redis(db, client, settings, redis_server) -> None:
    """A running Redis passes the redis check."""
    settings.REDIS_URL = redis_server
    response = client.get("/readyz")
    assert response.status_code == 200
    assert checks_of(response)["redis"] == {"name": "redis", "ok": True, "detail": "reachable"}


@pytest.fixture
def cluster(settings) -> None:
    settings.KUBECONFIG = "/etc/dra-dashboard/kubeconfig"
    settings.READY_MAX_WATCH_AGE = 120


def test_readyz_fails_on_stale_watcher_heartbeat(db, client, cluster) -> None:
    """A served kind whose heartbeat is older than READY_MAX_WATCH_AGE makes /readyz 503."""
    now = timezone.now()
    SyncState.objects.create(
        kind="ResourceSlice", served=True, heartbeat_at=now, verified_at=now, **CURRENT
    )
    SyncState.objects.create(
        kind="ResourceClaim", served=True, heartbeat_at=now - timedelta(seconds=300)
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    detail = checks_of(response)["watchers"]["detail"]
    assert "ResourceClaim" in detail
    assert "ResourceSlice" not in detail


def test_readyz_ready_with_fresh_heartbeats_ignoring_unserved_kinds(db, client, cluster) -> None:
    """Fresh served kinds pass; a kind the server does not serve may be stale."""
    now = timezone.now()
    SyncState.objects.create(
        kind="ResourceSlice", served=True, heartbeat_at=now, verified_at=now, **CURRENT
    )
    SyncState.objects.create(
        kind="Node",
        served=True,
        heartbeat_at=now - timedelta(seconds=60),
        verified_at=now,
        **CURRENT,
    )
    SyncState.objects.create(
        kind="ResourceClass", served=False, heartbeat_at=now - timedelta(days=1)
    )
    response = client.get("/readyz")
    assert response.status_code == 200
    assert checks_of(response)["watchers"]["detail"] == ("2 served kinds, heartbeats within 120s")


def test_readyz_not_ready_before_any_watcher_reported(db, client, cluster) -> None:
    """With a cluster configured and no SyncState yet, the watchers check fails."""
    response = client.get("/readyz")
    assert response.status_code == 503
    assert checks_of(response)["watchers"]["detail"] == "no watcher has reported yet"


def test_readyz_never_reported_heartbeat_is_stale(db, client, cluster) -> None:
    """A served kind without any heartbeat counts as stale."""
    SyncState.objects.create(kind="Pod", served=True, heartbeat_at=None)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "Pod (never)" in checks_of(response)["watchers"]["detail"]


def test_ready_max_watch_age_zero_disables_the_bound(db, client, cluster, settings) -> None:
    """READY_MAX_WATCH_AGE=0 reports heartbeats but does not gate readiness on their age."""
    settings.READY_MAX_WATCH_AGE = 0
    SyncState.objects.create(
        kind="Node", served=True, heartbeat_at=timezone.now() - timedelta(days=2)
    )
    response = client.get("/readyz")
    assert response.status_code == 200
    assert checks_of(response)["watchers"]["detail"] == "1 served kinds, heartbeats not enforced"


def test_readyz_reports_unreadable_sync_state(db, client, cluster) -> None:
    """A failing SyncState query (e.g. an unmigrated database) fails the watchers check, no 500."""

    def missing_table(execute, sql, params, many, context):
        if "inventory_syncstate" in sql:
            raise OperationalError("no such table: inventory_syncstate")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(missing_table):
        response = client.get("/readyz")
    assert response.status_code == 503
    checks = checks_of(response)
    assert checks["database"]["ok"] is True
    assert checks["watchers"]["detail"] == (
        "cannot read the sync state: OperationalError: no such table: inventory_syncstate"
    )


def test_readyz_fails_on_a_stale_cursor_and_names_the_kind(db, client, cluster) -> None:
    """A served kind whose cursor is not valid for the cluster is stale: 503 naming it."""
    now = timezone.now()
    SyncState.objects.create(
        kind="ResourceSlice", served=True, heartbeat_at=now, verified_at=now, **CURRENT
    )
    SyncState.objects.create(
        kind="ResourceClaim",
        served=True,
        heartbeat_at=now,
        verified_at=now,
        resource_version="9400",
        cursor_valid=False,
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    sync = checks_of(response)["sync"]
    assert sync["ok"] is False
    assert "stale" in str(sync["detail"]) and "ResourceClaim" in str(sync["detail"])
    assert "ResourceSlice" not in str(sync["detail"])


def test_readyz_fails_when_verification_is_too_old(db, client, cluster) -> None:
    """A kind not confirmed by a list or cursor check for longer than the bound is stale."""
    now = timezone.now()
    SyncState.objects.create(
        kind="Node",
        served=True,
        heartbeat_at=now,
        verified_at=now - SyncState.STALE_AFTER - timedelta(seconds=1),
        **CURRENT,
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "Node" in str(checks_of(response)["sync"]["detail"])


def test_not_served_kinds_are_neutral(db, client, cluster) -> None:
    """Kinds the cluster does not serve neither fail nor count as stale, whatever their cursor."""
    now = timezone.now()
    SyncState.objects.create(kind="Node", served=True, heartbeat_at=now, verified_at=now, **CURRENT)
    SyncState.objects.create(
        kind="ResourceClass",
        served=False,
        not_served_reason="resource.k8s.io/v1alpha2 is not served",
        heartbeat_at=now,
    )
    response = client.get("/readyz")
    assert response.status_code == 200
    assert checks_of(response)["sync"]["detail"] == (
        "1 served kinds, 1 not served (fine), all current"
    )


def test_stale_is_reported_but_not_enforced_with_max_age_zero(
    db, client, cluster, settings
) -> None:
    """READY_MAX_WATCH_AGE=0 keeps /readyz up and still says which kind is stale."""
    settings.READY_MAX_WATCH_AGE = 0
    SyncState.objects.create(kind="Node", served=True, heartbeat_at=timezone.now())
    response = client.get("/readyz")
    assert response.status_code == 200
    assert "(not enforced)" in str(checks_of(response)["sync"]["detail"])


def test_readyz_fails_when_the_database_refuses_writes(db, client) -> None:
    """A database that answers SELECT 1 but refuses writes (read-only, locked) is not ready."""

    def read_only(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("UPDATE"):
            raise OperationalError("attempt to write a readonly database")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(read_only):
        response = client.get("/readyz")
    assert response.status_code == 503
    checks = checks_of(response)
    assert checks["database"]["ok"] is True
    assert checks["database-write"] == {
        "name": "database-write",
        "ok": False,
        "detail": f"{connection.vendor}: OperationalError: attempt to write a readonly database",
    }


def test_failing_readyz_logs_once_per_change_never_at_error(db, client, cluster, caplog) -> None:
    """Probes failing alike log one WARNING naming the check (Django's own 503 line at DEBUG);
    another failing check logs again, and passing again logs one INFO."""
    health.READINESS_LOG.reset()
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django.request")
    for _ in range(3):
        assert client.get("/readyz").status_code == 503
    stale = timezone.now() - timedelta(seconds=300)
    SyncState.objects.create(kind="Node", served=True, heartbeat_at=stale, verified_at=stale)
    for _ in range(2):
        assert client.get("/readyz").status_code == 503
    SyncState.objects.filter(kind="Node").update(
        heartbeat_at=timezone.now(), verified_at=timezone.now(), **CURRENT
    )
    for _ in range(2):
        assert client.get("/readyz").status_code == 200
    lines = [
        (r.levelname, getattr(r, "failing", None))
        for r in caplog.records
        if r.name == "console.health"
    ]
    assert lines == [("WARNING", ["watchers"]), ("WARNING", ["watchers", "sync"]), ("INFO", None)]
    assert [r.levelname for r in caplog.records if r.name == "django.request"] == ["DEBUG"] * 5
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
