"""The Celery application shared by the web process, workers and beat.

The beat schedule and the task queues are what the apps registered (`dashboard.registry`).
"""

import os
from typing import Any

from celery import Celery

from dashboard import registry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")


def route_to_registered_queue(name: str, *args: Any, **kwargs: Any) -> dict[str, str] | None:
    """A Celery router: the queue an app registered for the task, else Celery's default."""
    queue = registry.task_queue(name)
    return {"queue": queue} if queue else None


app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Views, not copies: the apps register in AppConfig.ready(), which runs when the worker or beat
# sets Django up, after this module was imported. Beat reads the schedule when it builds its
# scheduler; the router is asked each time a task is sent.
app.conf.beat_schedule = registry.BeatSchedule()
app.conf.task_routes = (route_to_registered_queue,)
