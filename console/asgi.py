"""ASGI entry point: HTTP through Django, websockets through Channels (same-origin, signed in)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.signals import request_finished  # noqa: E402
from django.db import connections  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from dashboard.cancel import CancelOnDisconnect  # noqa: E402
from dashboard.security import WebsocketOriginValidator, harden  # noqa: E402
from dashboard.threads import KeptRequestThreads  # noqa: E402
from inventory.middleware import ClusterScopeWebsocket  # noqa: E402


def close_request_connections(sender: object, **_: object) -> None:
    """Close the database connections of an ASGI request's thread when the request ends.

    Django runs each ASGI request in a thread of its own, so a connection kept for reuse
    (CONN_MAX_AGE, which the worker's long-lived threads want) is never reused: it stayed open
    after its thread, one more per request, until PostgreSQL refused clients. Django's advice
    for ASGI is the same: no persistent connections in the web process.
    """
    if not (isinstance(sender, type) and issubclass(sender, ASGIHandler)):
        return  # the test client's requests share the test's transaction
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


request_finished.connect(close_request_connections, dispatch_uid="console.asgi.close_connections")

if settings.EMBEDDED_SYNC:
    from console import embedded

    embedded.start()

# Requests reuse the threads of earlier ones instead of a new thread each (dashboard/threads.py).
request_threads = KeptRequestThreads(django_asgi_app)

application = ProtocolTypeRouter(
    {
        # A search whose client went away, or that runs when the server stops, is cancelled.
        "http": CancelOnDisconnect(request_threads),
        "websocket": WebsocketOriginValidator(
            AuthMiddlewareStack(ClusterScopeWebsocket(URLRouter(websocket_urlpatterns)))
        ),
    }
)
# Trusted-proxy headers and the request body cap, around everything (dashboard/security.py).
application = harden(application)
