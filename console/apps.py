from django.apps import AppConfig

from dashboard import registry


class ConsoleConfig(AppConfig):
    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The overview heads the sidebar, the tools close it; the claims pages sit between.
        registry.register_nav("overview", "Overview", order=0)
        registry.register_nav("what-if", "What-if", order=900)
        registry.register_nav("sync-status", "Sync status", order=910)
        # The overview chart's history: one utilisation sample per driver a minute.
        registry.register_periodic_task(
            "sample-utilisation", task="console.tasks.sample_utilisation", seconds=60
        )
