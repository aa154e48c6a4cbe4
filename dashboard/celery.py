"""The Celery application shared by the web process, workers and beat."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Restart any missing watcher within a minute (inventory.tasks.ensure_watchers).
app.conf.beat_schedule = {
    "ensure-watchers": {"task": "inventory.tasks.ensure_watchers", "schedule": 30.0},
    "refresh-diagnoses": {"task": "claims.tasks.refresh_diagnoses", "schedule": 60.0},
    "sample-utilisation": {"task": "console.tasks.sample_utilisation", "schedule": 60.0},
}
