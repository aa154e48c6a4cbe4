from django.apps import AppConfig

from dashboard import registry

# The claims pages in the sidebar, in this order after the overview and before the tools:
# (URL name, label, the detail pages it stands for).
NAV = (
    ("pool-list", "Pools", ("pool-detail",)),
    ("device-list", "Devices", ("device-detail",)),
    ("device-class-list", "DeviceClasses", ("device-class-detail",)),
    ("taint-rule-list", "Taint rules", ()),
    ("node-list", "Nodes", ("node-detail",)),
    ("claim-list", "Claims", ("claim-detail",)),
    ("template-list", "Claim templates", ("template-detail",)),
    ("pod-list", "Pods", ("pod-detail",)),
    ("quota-list", "Quotas", ()),
    ("leak-list", "Leaks", ()),
    ("resource-class-list", "ResourceClasses", ()),
    ("scheduling-context-list", "Scheduling contexts", ()),
)


class ClaimsConfig(AppConfig):
    name = "claims"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The sync calls back after each batch; what it calls is the Celery side's business.
        from claims.events import register_events
        from claims.sync import register_handlers
        from claims.tasks import schedule_diagnoses

        register_handlers(diagnoses_stale=schedule_diagnoses)
        register_events()
        for order, (url_name, label, sections) in enumerate(NAV, start=1):
            registry.register_nav(url_name, label, order=100 + 10 * order, sections=sections)
        registry.register_live_topics("claims", "templates", "pods", "quotas", "whatif", "events")
        registry.register_periodic_task(
            "refresh-diagnoses", task="claims.tasks.refresh_diagnoses", seconds=60
        )
