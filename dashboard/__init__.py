"""The base: settings, the Celery app, live updates, the registries apps fill, shared helpers."""

from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
