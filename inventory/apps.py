from django.apps import AppConfig
from django.conf import settings

from dashboard import registry


class InventoryConfig(AppConfig):
    name = "inventory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        # Importing the module registers the inventory kinds' sync handlers.
        import inventory.sync  # noqa: F401
        from inventory.planner import after_migrate

        # After every migrate: a table SQLite remade lost its statistics (inventory.planner).
        post_migrate.connect(after_migrate, dispatch_uid="inventory.planner.seed")
        from inventory.visibility import sharing_key

        # Live renders are shared only between people who see the same namespaces.
        registry.register_viewer_key(sharing_key)

        registry.register_live_topics(
            "nodes", "namespaces", "classes", "pools", "slices", "devices", "sync"
        )
        # Workers adopt free watch leases themselves (inventory.leases); beat's check is an extra
        # that is harmless when beat runs and missed by nobody when it does not.
        # Not in the embedded mode: it starts the watchers itself, in the web process.
        registry.register_periodic_task(
            "ensure-watchers", task="inventory.tasks.ensure_watchers", seconds=30, embedded=False
        )
        # Long-lived watchers get their own queue (DASHBOARD_WATCH_QUEUE), so the workers that
        # consume it take them and what-if jobs never wait behind them.
        registry.register_task_queue("inventory.tasks.watch_kind", queue=settings.WATCH_QUEUE)
