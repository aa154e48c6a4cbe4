"""Page routes of the inventory app (the API lives under api/inventory/)."""

from django.urls import URLPattern, URLResolver, path

from inventory import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("pools/", views.pool_list, name="pool-list"),
    path("pools/<int:pk>/", views.pool_detail, name="pool-detail"),
    path("devices/<int:pk>/", views.device_detail, name="device-detail"),
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/<str:name>/", views.node_detail, name="node-detail"),
]
