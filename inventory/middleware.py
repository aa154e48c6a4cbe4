"""Every request works in one cluster's scope (`dashboard.scope`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from inventory.clusters import in_cluster


class ClusterScopeMiddleware:
    """The request's cluster: the default one, until URLs name clusters (issue #27)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with in_cluster():
            return self.get_response(request)


class ClusterScopeWebsocket:
    """A websocket's consumer works in the default cluster's scope (Channels middleware)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, connection: dict[str, Any], receive: Any, send: Any) -> Any:
        with in_cluster():
            return await self.inner(connection, receive, send)
