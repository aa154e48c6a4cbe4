"""Routes of the inventory API, mounted at /api/inventory/ (kebab-case plural paths)."""

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from inventory.api import views

app_name = "inventory-api"

router = DefaultRouter()
router.include_format_suffixes = False
router.register("nodes", views.NodeViewSet)
router.register("device-classes", views.DeviceClassViewSet)
router.register("resource-classes", views.ResourceClassViewSet)
router.register("pools", views.PoolViewSet)
router.register("resource-slices", views.ResourceSliceViewSet)
router.register("devices", views.DeviceViewSet)
router.register("counter-sets", views.CounterSetViewSet)
router.register("device-taint-rules", views.DeviceTaintRuleViewSet)
router.register("sync-status", views.SyncStateViewSet)
router.register("skipped-objects", views.SkippedObjectViewSet)

urlpatterns: list[URLPattern | URLResolver] = [
    path("utilisation/pools/", views.PoolUtilisationView.as_view(), name="utilisation-pools"),
    path("utilisation/classes/", views.ClassUtilisationView.as_view(), name="utilisation-classes"),
    *router.urls,
]
