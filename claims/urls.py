"""Page routes of the claims app, by area as in `claims/views/` (the REST API is `claims/api/`).

Detail pages are named by Kubernetes names, never database ids: rows are deleted and
re-created under churn (a replaced node's pool gets a new id), names stay. Old `/pools/<id>/`
and `/devices/<id>/` links redirect to the name while the row exists.

Driver, device, node and namespace names never contain `/`; a pool name may (DNS subdomains
joined by `/`), so a pool takes every segment between the driver and the end (pool pages) or
the last segment, which is the device (device pages).
"""

from django.urls import URLPattern, URLResolver, path, register_converter

from claims.views import claims, devices, reports


class PoolNameConverter:
    """A pool name: one or more non-empty segments joined by `/` (`str` is one segment)."""

    regex = r"[^/]+(?:/[^/]+)*"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(PoolNameConverter, "pool")

urlpatterns: list[URLPattern | URLResolver] = [
    path("pools/", devices.pool_list, name="pool-list"),
    path("pools/<int:pk>/", devices.pool_by_id, name="pool-by-id"),
    path("pools/<str:driver>/<pool:pool>/", devices.pool_detail, name="pool-detail"),
    path("devices/", devices.device_list, name="device-list"),
    path("devices/<int:pk>/", devices.device_by_id, name="device-by-id"),
    path(
        "devices/<str:driver>/<pool:pool>/<str:name>/",
        devices.device_detail,
        name="device-detail",
    ),
    path("device-classes/", devices.device_class_list, name="device-class-list"),
    path("device-classes/<str:name>/", devices.device_class_detail, name="device-class-detail"),
    path("taint-rules/", devices.taint_rule_list, name="taint-rule-list"),
    path("resource-classes/", devices.resource_class_list, name="resource-class-list"),
    path("nodes/", devices.node_list, name="node-list"),
    path("nodes/<str:name>/", devices.node_detail, name="node-detail"),
    path("claims/", claims.claim_list, name="claim-list"),
    path("claims/<str:namespace>/<str:name>/", claims.claim_detail, name="claim-detail"),
    path("templates/", claims.template_list, name="template-list"),
    path(
        "templates/<str:namespace>/<str:name>/",
        claims.template_detail,
        name="template-detail",
    ),
    path("pods/", claims.pod_list, name="pod-list"),
    path("pods/<str:namespace>/<str:name>/", claims.pod_detail, name="pod-detail"),
    path("scheduling-contexts/", claims.scheduling_context_list, name="scheduling-context-list"),
    path("quotas/", claims.quota_list, name="quota-list"),
    path("leaks/", reports.leak_list, name="leak-list"),
    path("search/", reports.search, name="search"),
]
