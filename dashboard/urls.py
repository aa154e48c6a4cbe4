"""Top-level URLs: pages, the API per app, the OpenAPI schema and docs, health and metrics."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("dashboard.auth_urls")),
    path("api/inventory/", include("inventory.api.urls")),
    path("api/claims/", include("claims.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("", include("dashboard.ops_urls")),
    path("", include("inventory.urls")),
    path("", include("claims.urls")),
    path("", include("dashboard.page_urls")),
]
