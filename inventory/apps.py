from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "inventory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the module registers the inventory kinds' sync handlers.
        import inventory.sync  # noqa: F401
