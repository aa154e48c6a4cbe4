"""Utilisation samples written while the model lived in the base app are kept by the move."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from claims.models import UtilisationSample

BEFORE_THE_MOVE = [("claims", "0002_pod_resource_health"), ("dashboard", "0001_initial")]
TAKEN_AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def migrate(targets: list[tuple[str, str]] | None = None) -> MigrationExecutor:
    """Migrate the test database to `targets` (default: every app's latest migration)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
def test_rows_and_content_type_survive_the_move() -> None:
    """A sample stored in the old table is read back through the claims model, same values."""
    try:
        executor = migrate(BEFORE_THE_MOVE)
        assert "dashboard_utilisationsample" in connection.introspection.table_names()
        old_apps = executor.loader.project_state(BEFORE_THE_MOVE).apps
        old_apps.get_model("dashboard", "UtilisationSample").objects.create(
            taken_at=TAKEN_AT, driver="gpu.example.com", total=8, allocated=3, tainted=1
        )
        ContentType.objects.get_or_create(app_label="dashboard", model="utilisationsample")
        ContentType.objects.filter(app_label="claims", model="utilisationsample").delete()
    finally:
        migrate()
        ContentType.objects.clear_cache()
    assert "dashboard_utilisationsample" not in connection.introspection.table_names()
    row = UtilisationSample.objects.get()
    assert (row.taken_at, row.driver, row.total, row.allocated, row.tainted, row.unhealthy) == (
        TAKEN_AT,
        "gpu.example.com",
        8,
        3,
        1,
        0,
    )
    assert set(
        ContentType.objects.filter(model="utilisationsample").values_list("app_label", flat=True)
    ) == {"claims"}
    UtilisationSample.objects.create(taken_at=TAKEN_AT, driver="nic.example.com", total=2)
    assert UtilisationSample.objects.count() == 2
