"""Websocket routes: the live-update socket."""

from django.urls import URLPattern, path

from console.consumers import LiveConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/live/", LiveConsumer.as_asgi()),
]
