from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    name = "claims"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from claims.sync import register_handlers

        register_handlers()
