"""The base names no app: apps register their sidebar links, beat tasks and live topics."""

from __future__ import annotations

import ast
import importlib
import logging
import re

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from dashboard import registry
from dashboard.celery import app
from dashboard.live import publish_changes
from inventory.sync import HANDLERS
from inventory.tasks import watch_kind
from tests.paths import ROOT

BEAT = {
    "ensure-watchers": ("inventory.tasks.ensure_watchers", 30.0),
    "refresh-diagnoses": ("claims.tasks.refresh_diagnoses", 60.0),
    "sample-utilisation": ("console.tasks.sample_utilisation", 60.0),
}
APP_NAME = re.compile(r"\b(inventory|claims|console|demo)\b")
# Django's composition point: the only settings that may name the apps.
COMPOSITION = {
    "INSTALLED_APPS",
    "MIDDLEWARE",
    "ROOT_URLCONF",
    "ASGI_APPLICATION",
    "WSGI_APPLICATION",
}


def test_beat_schedule_is_what_the_apps_registered() -> None:
    """Celery's beat_schedule holds each app's periodic task, under its entry name."""
    schedule = app.conf.beat_schedule
    assert {name: (entry["task"], entry["schedule"]) for name, entry in schedule.items()} == BEAT


def test_every_scheduled_task_exists() -> None:
    """Each registered entry names a Celery task that its module defines."""
    for entry in registry.periodic_tasks():
        importlib.import_module(entry.task.rpartition(".")[0])
        assert entry.task in app.tasks, entry.task


# Transactional: the scheduler closes connections it finds outside autocommit (a test's atomic
# block) as beat's loop would.
@pytest.mark.django_db(transaction=True)
def test_beats_database_scheduler_stores_the_registered_entries() -> None:
    """django_celery_beat's scheduler, as `celery beat` builds it, stores every entry."""
    DatabaseScheduler(app=app)
    stored = dict(PeriodicTask.objects.filter(name__in=BEAT).values_list("name", "task"))
    assert stored == {name: task for name, (task, _seconds) in BEAT.items()}


def test_sidebar_links_reverse_in_their_order() -> None:
    """Every registered link opens a page; the overview comes first, the tools last."""
    links = registry.nav_links()
    assert [link.url_name for link in links][:2] == ["overview", "pool-list"]
    assert [link.url_name for link in links][-2:] == ["what-if", "sync-status"]
    for link in links:
        reverse(link.url_name)
        assert link.url_name in link.sections


def test_the_sidebar_marks_the_current_section(db, viewer_user, client) -> None:
    """The page shown highlights its own link in the sidebar, and only that one."""
    client.force_login(viewer_user)
    page = client.get(reverse("sync-status")).content.decode()
    assert f'<a href="{reverse("sync-status")}" class="active"' in page
    assert page.count('aria-current="page"') == 1


def test_every_sync_topic_is_registered() -> None:
    """Each kind's live topic is one that pages may follow."""
    topics = registry.live_topics()
    assert {handler.topic for handler in HANDLERS.values()} <= topics
    assert {"sync", "whatif"} <= topics


def test_an_unregistered_topic_is_reported(db, caplog) -> None:
    """Publishing on a topic no app registered logs a warning naming it."""
    with caplog.at_level(logging.WARNING, logger="dashboard.live"):
        publish_changes({"no-such-topic": ["1"], "nodes": ["n"]})
    assert "no-such-topic" in caplog.text and "nodes" not in caplog.text


def test_watchers_go_to_their_queue() -> None:
    """The watcher task is sent to the queue its app registered, other tasks to the default."""
    router = app.amqp.Router()
    assert router.route({}, watch_kind.name)["queue"].name == "watchers"
    assert router.route({}, "claims.tasks.refresh_diagnoses")["queue"].name == "celery"


def _composition_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id in COMPOSITION for target in node.targets
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def test_the_base_names_no_app() -> None:
    """No module of `dashboard/` names an app, but for Django's composition point in settings."""
    found = []
    for path in sorted((ROOT / "dashboard").rglob("*.py")):
        text = path.read_text()
        allowed = _composition_lines(ast.parse(text)) if path.name == "settings.py" else set()
        for number, line in enumerate(text.splitlines(), start=1):
            if number not in allowed and APP_NAME.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
