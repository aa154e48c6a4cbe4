"""Routes of the claims API, mounted at /api/claims/ (kebab-case plural paths).

`INVENTORY_ROUTES` and `inventory_urlpatterns` are the pools, devices and utilisation endpoints,
which the root URLconf mounts under /api/inventory/ beside the inventory's own routes.
"""

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from claims.api import reports, views, whatif

app_name = "claims-api"

router = DefaultRouter()
router.include_format_suffixes = False
router.register("resource-claims", views.ResourceClaimViewSet)
router.register("resource-claim-templates", views.ResourceClaimTemplateViewSet)
router.register("pods", views.PodViewSet)
router.register("resource-quotas", views.ResourceQuotaViewSet)
router.register("pod-scheduling-contexts", views.PodSchedulingContextViewSet)
router.register("allocated-devices", views.AllocatedDeviceViewSet)

INVENTORY_ROUTES = (
    ("pools", views.PoolViewSet),
    ("devices", views.DeviceViewSet),
)

inventory_urlpatterns: list[URLPattern | URLResolver] = [
    path("leaks/", reports.LeakView.as_view(), name="leaks"),
    path("utilisation/pools/", views.PoolUtilisationView.as_view(), name="utilisation-pools"),
    path("utilisation/classes/", views.ClassUtilisationView.as_view(), name="utilisation-classes"),
    path("pool-status/", reports.PoolStatusView.as_view(), name="pool-status"),
    path("availability/", views.AvailabilityView.as_view(), name="availability"),
]

urlpatterns: list[URLPattern | URLResolver] = [
    path("leaks/", reports.LeakView.as_view(), name="leaks"),
    path("what-if/", whatif.WhatIfView.as_view(), name="what-if"),
    path("what-if/jobs/", whatif.WhatIfJobListView.as_view(), name="what-if-jobs"),
    path("what-if/jobs/<str:job_id>/", whatif.WhatIfJobDetailView.as_view(), name="what-if-job"),
    *router.urls,
]
