"""Page routes of the claims app (the API lives under api/claims/)."""

from django.urls import URLPattern, URLResolver, path

from claims import report_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("pools/", views.pool_list, name="pool-list"),
    path("pools/<int:pk>/", views.pool_detail, name="pool-detail"),
    path("devices/<int:pk>/", views.device_detail, name="device-detail"),
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/<str:name>/", views.node_detail, name="node-detail"),
    path("claims/", views.claim_list, name="claim-list"),
    path("claims/<str:namespace>/<str:name>/", views.claim_detail, name="claim-detail"),
    path("templates/", views.template_list, name="template-list"),
    path("quotas/", views.quota_list, name="quota-list"),
    path("leaks/", report_views.leak_list, name="leak-list"),
]
