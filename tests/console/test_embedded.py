"""The embedded mode runs the periodic tasks the apps registered, except those it replaces."""

from __future__ import annotations

from claims.tasks import refresh_diagnoses
from console.embedded import embedded_jobs
from console.tasks import sample_utilisation
from dashboard import registry


def test_embedded_jobs_are_the_registered_periodic_tasks_it_does_not_replace() -> None:
    """Every registered task runs in the web process, but ensure-watchers (it starts them)."""
    jobs = dict(embedded_jobs())
    registered = {task.name for task in registry.periodic_tasks()}
    assert "ensure-watchers" in registered and "ensure-watchers" not in jobs
    assert set(jobs) == registered - {"ensure-watchers"}
    assert jobs["refresh-diagnoses"] is refresh_diagnoses
    assert jobs["sample-utilisation"] is sample_utilisation
