"""Page routes of the claims app (the API lives under api/claims/)."""

from django.urls import URLPattern, URLResolver, path

from claims import object_views, report_views, views

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
    path("devices/", object_views.device_list, name="device-list"),
    path("device-classes/", object_views.device_class_list, name="device-class-list"),
    path(
        "device-classes/<str:name>/", object_views.device_class_detail, name="device-class-detail"
    ),
    path("taint-rules/", object_views.taint_rule_list, name="taint-rule-list"),
    path("resource-classes/", object_views.resource_class_list, name="resource-class-list"),
    path(
        "scheduling-contexts/",
        object_views.scheduling_context_list,
        name="scheduling-context-list",
    ),
    path("pods/", object_views.pod_list, name="pod-list"),
    path("pods/<str:namespace>/<str:name>/", object_views.pod_detail, name="pod-detail"),
    path("search/", object_views.search, name="search"),
    path(
        "templates/<str:namespace>/<str:name>/",
        object_views.template_detail,
        name="template-detail",
    ),
    path("leaks/", report_views.leak_list, name="leak-list"),
]
