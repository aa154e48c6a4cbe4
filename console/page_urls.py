"""Page routes of the console: overview, sync status and what-if (the claims pages are in
`claims/urls.py`)."""

from django.urls import URLPattern, URLResolver, path

from console import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.overview, name="overview"),
    path("sync/", views.sync_status, name="sync-status"),
    path("what-if/", views.what_if, name="what-if"),
]
