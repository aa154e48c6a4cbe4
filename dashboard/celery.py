"""The Celery application shared by the web process, workers and beat.

The beat schedule and the task queues are what the apps registered (`dashboard.registry`).

Logging: workers and beat log through settings.LOGGING like every process (JSON lines with
DASHBOARD_LOG_JSON=1). Celery is told so through its `setup_logging` signal, so it adds no
handler of its own (its `celery.task` logger would otherwise print its own plain format). What
Celery prints past logging is dealt with here when JSON is on: the worker's banner is turned off
(as `--quiet` does; its facts are logged as one record instead) and the notices its signal
handlers write straight to stdout ("worker: Warm shutdown") are written as JSON lines. Beat's
banner needs `--quiet` on the command line (deploy/entrypoint.sh passes it to both).
"""

import contextlib
import logging
import os
import sys
from typing import Any

from celery import Celery, signals
from django.conf import settings

from dashboard import registry
from dashboard.logging import JsonFormatter

log = logging.getLogger(__name__)

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


@signals.setup_logging.connect
def keep_django_logging(**_: Any) -> None:
    """Celery configures no logging: Django applied settings.LOGGING when the worker or beat
    set it up, before this signal."""


@signals.celeryd_init.connect
def write_worker_notices_as_json(**_: Any) -> None:
    """With JSON logs, the worker's signal-handler notices are written as JSON lines too."""
    if settings.LOG_JSON:
        from celery.apps import worker

        worker.safe_say = say_as_json


@signals.celeryd_after_setup.connect
def log_worker_start(sender: str, instance: Any, **_: Any) -> None:
    """With JSON logs (or `--quiet`), the banner's facts as one record instead of the banner.

    Stray prints go through logging as well (Celery redirects stdout only when it configured
    logging itself).
    """
    if settings.LOG_JSON:
        instance.quiet = True
        if instance.redirect_stdouts:
            instance.app.log.redirect_stdouts(instance.redirect_stdouts_level)
    if not instance.quiet:
        return
    tasks = sorted(name for name in instance.app.tasks if not name.startswith("celery."))
    queues = sorted(instance.app.amqp.queues)
    log.info(
        "worker %s starting: %s tasks, queues %s, concurrency %s",
        sender,
        len(tasks),
        ", ".join(queues),
        instance.concurrency,
        extra={"hostname": sender, "queues": queues, "concurrency": instance.concurrency},
    )


def say_as_json(msg: str, f: Any = sys.__stderr__) -> None:
    """`celery.apps.worker.safe_say` as a JSON line.

    Celery writes these notices from signal handlers straight to the file descriptor, past
    logging (whose locks a signal handler must not take); this formats the record itself and
    writes it the same way.
    """
    record = logging.LogRecord("celery.apps.worker", logging.INFO, "", 0, msg.strip(), (), None)
    # As Celery's own: losing a notice must never break the shutdown.
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.write(f.fileno(), (JsonFormatter().format(record) + "\n").encode())
