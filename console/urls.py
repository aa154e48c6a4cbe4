"""Top-level URLs: pages, the API per app, the OpenAPI schema and docs, health and metrics."""

from __future__ import annotations

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from claims.api import urls as claims_api
from dashboard.oidc import admin_sign_in
from inventory.api import urls as inventory_api


def _inventory_api() -> list[URLPattern | URLResolver]:
    # One router, so that /api/inventory/ lists every kind whichever app serves it.
    router = DefaultRouter()
    router.include_format_suffixes = False
    for prefix, viewset in (*inventory_api.ROUTES, *claims_api.INVENTORY_ROUTES):
        router.register(prefix, viewset)
    return [*claims_api.inventory_urlpatterns, *router.urls]


urlpatterns: list[URLPattern | URLResolver] = [
    # Before the admin's own: with DASHBOARD_LOCAL_ACCOUNTS=0 its password form could never work.
    path("admin/login/", admin_sign_in),
    path("admin/", admin.site.urls),
    path("accounts/", include("dashboard.auth_urls")),
    path("api/inventory/", include((_inventory_api(), "inventory-api"))),
    path("api/claims/", include("claims.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("", include("console.ops_urls")),
    path("", include("claims.urls")),
    path("", include("console.page_urls")),
]
