"""Table versions move in commit order: no write is missed, whatever path made it."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, models, transaction
from django.utils import timezone

from claims.devices.classes import class_membership, table_fingerprint
from claims.models import Pod, ResourceClaim
from claims.templates import link_templates
from dashboard import scope
from inventory.models import DeviceClass, DeviceTaintRule, Node, ResourceSlice
from inventory.snapshot import import_files
from inventory.sync import apply_events, upsert_events
from inventory.versions import read_versions
from tests.console.demo import load_demo

SNAPSHOT = Path(__file__).parent / "fixtures" / "snapshot" / "small-cluster.yaml"
WATCHED: dict[type[models.Model], tuple[str, ...]] = {
    Node: (),
    DeviceClass: (),
    DeviceTaintRule: (),
    ResourceSlice: (),
    ResourceClaim: ("diagnosis", "diagnosed_at"),
    Pod: (),
}


def _summary(model: type[models.Model]) -> tuple[Any, ...]:
    """The fingerprint the dashboard used before versions: row count, newest synced_at, top pk."""
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), MAX(synced_at), MAX(id) FROM {table}")  # noqa: S608
        return tuple(cursor.fetchone())


def _version(model: type[models.Model]) -> tuple[str, str]:
    state = read_versions([model])[0]
    return state.version, state.deletes


def _class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


@pytest.mark.django_db(transaction=True)
def test_a_writer_committing_after_a_newer_one_moves_the_version_and_the_membership() -> None:
    """T1 stamps synced_at, T2 stamps later and commits first, a reader reads, then T1 commits
    an update: the old summary (count, newest synced_at, top pk) stays put and missed T1; the
    version moved, and the kept class membership follows T1's change."""
    load_demo(nodes=2, seed=1)
    classes = list(DeviceClass.objects.order_by("name")[:2])
    target, other = classes[0], classes[1]
    assert class_membership().members[target.name]
    stamped, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def late_writer() -> None:
        try:
            stamp = timezone.now() - timedelta(seconds=1)
            stamped.set()
            go.wait(timeout=60)
            with transaction.atomic():
                DeviceClass.objects.filter(pk=target.pk).update(
                    selectors=[{"cel": {"expression": "false"}}], synced_at=stamp
                )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=scope.carried(late_writer))
    thread.start()
    assert stamped.wait(timeout=60)
    with transaction.atomic():
        DeviceClass.objects.filter(pk=other.pk).update(synced_at=timezone.now())
    summary, version = _summary(DeviceClass), _version(DeviceClass)
    kept = class_membership()
    assert kept.members[target.name]
    go.set()
    thread.join()
    assert errors == []
    assert _summary(DeviceClass) == summary  # the old fingerprint missed the write
    assert _version(DeviceClass) != version
    assert class_membership().members[target.name] == frozenset()


def _claim_with_template() -> ResourceClaim:
    claim = ResourceClaim.objects.exclude(owner_pod="").first()
    assert claim is not None
    ResourceClaim.objects.filter(pk=claim.pk).update(template_name="")
    claim.refresh_from_db()
    return claim


def _link_template() -> None:
    claim = _claim_with_template()
    with transaction.atomic():  # as the pods watcher links, inside its batch
        assert link_templates([claim]) == 1


def _first(model: type[models.Model]) -> Any:
    row = model._default_manager.order_by("pk").first()
    assert row is not None
    return row


def _pods(count: int, *, phase: str) -> list[tuple[dict[str, Any], None]]:
    return [
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"bulk-{i}",
                    "namespace": "team-a",
                    "uid": f"bulk-{i}",
                    "resourceVersion": phase,
                },
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": phase},
            },
            None,
        )
        for i in range(count)
    ]


def _delete_slice() -> None:
    raw = copy.deepcopy(_first(ResourceSlice).raw)
    apply_events("ResourceSlice", [("DELETED", raw)], publish=False)


def _save_node() -> None:
    node = _first(Node)
    node.name = node.name + "-x"
    node.save()


def _raw_sql_taint_rule() -> None:
    upsert_events(
        "DeviceTaintRule",
        [
            (
                {
                    "apiVersion": "resource.k8s.io/v1alpha3",
                    "kind": "DeviceTaintRule",
                    "metadata": {"name": "r", "uid": "r"},
                    "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
                },
                None,
            )
        ],
        publish=False,
    )
    with connection.cursor() as cursor:
        cursor.execute("UPDATE inventory_devicetaintrule SET name = name || 'x'")


# (what writes, the table it writes, whether it deletes); run in this order on one database.
WRITERS: list[tuple[str, Callable[[], Any], type[models.Model], bool]] = [
    ("demo seeding", lambda: load_demo(nodes=2, seed=1), ResourceSlice, False),
    ("snapshot import", lambda: import_files([SNAPSHOT], merge=True), Pod, False),
    (
        "sync upsert of a class",
        lambda: upsert_events("DeviceClass", [(_class("new", "true"), None)], publish=False),
        DeviceClass,
        False,
    ),
    ("sync delete", _delete_slice, ResourceSlice, True),
    (
        "bulk insert (COPY on PostgreSQL)",
        lambda: upsert_events("Pod", _pods(60, phase="Pending"), publish=False),
        Pod,
        False,
    ),  # noqa: E501
    (
        "bulk update (COPY on PostgreSQL)",
        lambda: upsert_events("Pod", _pods(60, phase="Running"), publish=False),
        Pod,
        False,
    ),  # noqa: E501
    ("template linking", _link_template, ResourceClaim, False),
    ("model save", _save_node, Node, False),
    ("queryset delete", lambda: Pod.objects.filter(name="bulk-0").delete(), Pod, True),
    ("raw SQL", _raw_sql_taint_rule, DeviceTaintRule, False),
]


@pytest.mark.django_db(transaction=True)
def test_every_writer_moves_its_tables_version() -> None:
    """Each write path, committed, moves the version of the table it writes (and `deletes`
    when it deletes); a claim's diagnosis, the what-if's own writing, moves nothing."""
    for label, write, model, deletes in WRITERS:
        before = _version(model)
        write()
        after = _version(model)
        assert after[0] != before[0], label
        assert (after[1] != before[1]) == deletes, label
    before = table_fingerprint(*WATCHED)
    ResourceClaim.objects.update(diagnosis={"fits": False}, diagnosed_at=timezone.now())
    assert table_fingerprint(*WATCHED) == before


@pytest.mark.django_db
def test_an_update_of_any_column_moves_the_version() -> None:
    """Every column of every watched table counts but those the dashboard writes itself: a
    column added later without installing the triggers again fails here."""
    load_demo(nodes=2, seed=1)
    quote = connection.ops.quote_name
    for model, ignored in WATCHED.items():
        if not model._default_manager.exists():
            continue
        pk = _first(model).pk
        for field in model._meta.concrete_fields:
            column = field.column
            before = _version(model)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {quote(model._meta.db_table)} SET {quote(column)} = {quote(column)} "  # noqa: S608
                    "WHERE id = %s",
                    [pk],
                )
            moved = _version(model) != before
            assert moved == (column not in ignored), f"{model._meta.db_table}.{column}"


@pytest.mark.django_db(transaction=True)
def test_open_writers_wait_for_no_version_row_until_they_commit() -> None:
    """A transaction writing claims holds no version row while it is open: another writer of
    claims (another row) and one of pods commit meanwhile, and their versions move."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: its lock orders the versions already")
    load_demo(nodes=2, seed=1)
    first, second = ResourceClaim.objects.order_by("pk")[:2]
    holding, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def open_writer() -> None:
        try:
            with transaction.atomic():
                ResourceClaim.objects.filter(pk=first.pk).update(request_count=7)
                holding.set()
                done.wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=scope.carried(open_writer))
    thread.start()
    assert holding.wait(timeout=60)
    try:
        claims, pods = _version(ResourceClaim), _version(Pod)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")  # a wait would fail, not hang
        with transaction.atomic():
            ResourceClaim.objects.filter(pk=second.pk).update(request_count=8)
        with transaction.atomic():
            Pod.objects.update(phase="Running")
        assert _version(ResourceClaim)[0] != claims[0]
        assert _version(Pod)[0] != pods[0]
    finally:
        done.set()
        thread.join()
    assert errors == []
    assert set(
        ResourceClaim.objects.filter(pk__in=[first.pk, second.pk]).values_list(
            "request_count", flat=True
        )
    ) == {7, 8}


class _RolledBack(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_a_version_is_not_reached_again_with_other_rows() -> None:
    """A rolled-back write (a test's transaction, a failed batch) sets the version back; the
    next write must not reach the version the rolled-back one had, or what was kept under it
    (in this process, or in the Redis cache another database's process shares) is taken for
    other rows."""
    load_demo(nodes=2, seed=1)
    node = _first(Node)
    seen: list[Any] = []
    with pytest.raises(_RolledBack), transaction.atomic():
        Node.objects.filter(pk=node.pk).update(name="rolled-back")
        seen.append(read_versions([Node])[0].version)
        raise _RolledBack
    Node.objects.filter(pk=node.pk).update(name="committed")
    after = read_versions([Node])[0].version
    # PostgreSQL's private state inside the transaction names the transaction; SQLite's is the
    # version itself.
    assert after != seen[0] and not seen[0].startswith(after)
