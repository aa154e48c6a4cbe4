"""Websocket routes."""

from django.urls import path

websocket_urlpatterns: list = [
    # filled by the live-update layer (dashboard.consumers)
]
_ = path
