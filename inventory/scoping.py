"""Moving a single-cluster database into clusters: the migrations' own operations.

Every row synced before clusters existed belongs to the one cluster that was synced: the
`default` cluster, identified by the kube-system uid the sync had recorded.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from dashboard import scope
from inventory.choices import DEFAULT_CLUSTER


def create_default_cluster(apps: Any, schema_editor: Any) -> None:
    """The `default` cluster, with the uid the sync recorded (when it had seen one)."""
    alias = schema_editor.connection.alias
    cluster_model = apps.get_model("inventory", "Cluster")
    sync_state = apps.get_model("inventory", "SyncState")
    uids = (
        sync_state._default_manager.using(alias)
        .exclude(cluster_uid="")
        .values_list("cluster_uid", flat=True)
        .distinct()
    )
    known = list(uids[:2])
    cluster_model._default_manager.using(alias).get_or_create(
        name=DEFAULT_CLUSTER, defaults={"uid": known[0] if len(known) == 1 else ""}
    )


class AddClusterField(migrations.AddField):
    """AddField of a scoped model's `cluster` column: rows already stored go to the default
    cluster (the field's own default is the scope in force, which a migration has none of)."""

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        cluster_model = from_state.apps.get_model("inventory", "Cluster")
        alias = schema_editor.connection.alias
        default, _ = cluster_model._default_manager.using(alias).get_or_create(name=DEFAULT_CLUSTER)
        with scope.use(default.pk):
            super().database_forwards(app_label, schema_editor, from_state, to_state)
