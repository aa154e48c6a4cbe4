"""DRA Dashboard project package: settings, ASGI, Celery app, live updates and pages."""

from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
