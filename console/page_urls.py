"""Page routes of the console: overview, sync status (and the freshness the header polls) and
what-if (the claims pages are in `claims/urls.py`)."""

from django.urls import URLPattern, URLResolver, path

from console import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.overview, name="overview"),
    path("sync/", views.sync_status, name="sync-status"),
    path("freshness/", views.freshness, name="freshness"),
    path("what-if/", views.what_if, name="what-if"),
    path("what-if/shared/<str:token>/", views.what_if_shared, name="what-if-shared"),
]
