"""Claims made from a pod's template entry are linked to that template when their pod is written."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from claims.models import ResourceClaim
from claims.templates import POD_CLAIM_NAME, link_templates
from dashboard import scope
from inventory.sync import upsert_events


def _claim(namespace: str, pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{pod}-gpu-x1",
            "namespace": namespace,
            "uid": f"u-claim-{namespace}",
            "annotations": {POD_CLAIM_NAME: "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "p"}],
        },
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}},
    }


def _pod(namespace: str, name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"u-pod-{namespace}"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


@pytest.mark.django_db
def test_pods_of_one_name_in_two_namespaces_link_their_own_claims() -> None:
    """Claims written before their pods get the template their own pod's entry names, though
    another namespace has a pod of the same name; the claims are found by owner_pod's index."""
    upsert_events("ResourceClaim", [(_claim("a", "job"), None), (_claim("b", "job"), None)])
    assert set(ResourceClaim.objects.values_list("template_name", flat=True)) == {""}
    with CaptureQueriesContext(connection) as queries:
        upsert_events("Pod", [(_pod("a", "job", "small"), None), (_pod("b", "job", "big"), None)])
    linked = dict(ResourceClaim.objects.values_list("namespace", "template_name"))
    assert linked == {"a": "small", "b": "big"}
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith('SELECT "claims_resourceclaim"') and "FOR NO KEY" not in q["sql"]
    ]
    assert len(reads) == 1 and '"owner_pod" IN' in reads[0] and '"namespace" IN' not in reads[0]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + reads[0])
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "claim_owner_pod_idx" in plan


def _linked_pair() -> list[ResourceClaim]:
    """Two stored claims whose pods name two templates, unlinked, the higher key first."""
    upsert_events("Pod", [(_pod("a", "job", "small"), None), (_pod("b", "job", "big"), None)])
    upsert_events("ResourceClaim", [(_claim("a", "job"), None), (_claim("b", "job"), None)])
    ResourceClaim.objects.update(template_name="")
    return list(ResourceClaim.objects.order_by("-pk"))


@pytest.mark.django_db(transaction=True)
def test_relinking_waits_for_a_writer_of_the_same_claims_instead_of_deadlocking() -> None:
    """A writer holding the lower claim while re-linking runs, then writing the higher one (as
    the claims watcher writes its rows, in key order), is not deadlocked with it: re-linking
    takes the claims in key order and so holds none of them while it waits for the first."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers in the process")
    claims = _linked_pair()
    higher, lower = claims[0].pk, claims[1].pk
    errors: list[BaseException] = []
    pids: list[int] = []

    def relink() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    pids.append(cursor.fetchone()[0])
                link_templates(claims)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=scope.carried(relink))
    with transaction.atomic():
        ResourceClaim.objects.filter(pk=lower).update(request_count=5)
        thread.start()
        waiting = False
        for _ in range(2000):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s) "
                    "AND wait_event_type = 'Lock'",
                    [pids],
                )
                waiting = cursor.fetchone()[0] == 1
            if waiting:
                break
            time.sleep(0.005)
        assert waiting, "re-linking never waited for the lower claim"
        ResourceClaim.objects.filter(pk=higher).update(request_count=5)
    thread.join()
    assert errors == []
    linked = dict(ResourceClaim.objects.values_list("namespace", "template_name"))
    assert linked == {"a": "small", "b": "big"}
    assert set(ResourceClaim.objects.values_list("request_count", flat=True)) == {5}


@pytest.mark.django_db
def test_relinking_locks_the_changed_claims_once_in_key_order() -> None:
    """On PostgreSQL one read locks the changed claims by key before the updates by name; an
    unchanged claim sends nothing."""
    claims = _linked_pair()
    with CaptureQueriesContext(connection) as queries:
        assert link_templates(claims) == 2
    sql = [q["sql"] for q in queries]
    updates = [s for s in sql if s.startswith('UPDATE "claims_resourceclaim"')]
    locks = [s for s in sql if "FOR NO KEY UPDATE" in s]
    assert len(updates) == 2
    if connection.vendor == "postgresql":
        assert len(locks) == 1 and "ORDER BY 1 ASC" in locks[0]
        assert sql.index(locks[0]) < sql.index(updates[0])
    else:
        assert locks == []
    with CaptureQueriesContext(connection) as queries:
        assert link_templates(ResourceClaim.objects.all()) == 0
    assert not [q for q in queries if "UPDATE" in q["sql"]]
