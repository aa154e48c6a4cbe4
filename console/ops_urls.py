"""Operations endpoints at the root: liveness, readiness and Prometheus metrics (no login)."""

from django.urls import URLPattern, URLResolver, path

from console import health, metrics

urlpatterns: list[URLPattern | URLResolver] = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
]
