"""`manage.py migrate`, whose printed progress becomes log records when logs are JSON.

Django's migrate prints its plan and each "Applying app.0001_initial... OK" to stdout as plain
text; the image's one-shot `migrate` process would then be the one process whose output is not
JSON. With DASHBOARD_LOG_JSON=1 each printed line is logged instead (logger `dashboard.migrate`,
INFO; what the command writes to stderr at WARNING), prints of post-migrate handlers included.
Otherwise, or when a caller hands the command a stream of its own, it is Django's unchanged.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from django.conf import settings
from django.core.management.commands import migrate

from dashboard.logging import LineLogger

log = logging.getLogger("dashboard.migrate")


class Command(migrate.Command):
    def execute(self, *args: Any, **options: Any) -> str | None:
        if not settings.LOG_JSON or options.get("stdout") or options.get("stderr"):
            return super().execute(*args, **options)
        out = LineLogger(log, logging.INFO)
        err = LineLogger(log, logging.WARNING)
        try:
            with contextlib.redirect_stdout(out):
                return super().execute(*args, **options, stdout=out, stderr=err)
        finally:
            out.close()
            err.close()
