"""ASGI entry point: HTTP through Django, websockets through Channels (same-origin, signed in)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from dashboard.cancel import CancelOnDisconnect, watch_server_shutdown  # noqa: E402
from dashboard.security import WebsocketOriginValidator, harden  # noqa: E402

if settings.EMBEDDED_SYNC:
    from console import embedded

    embedded.start()

application = ProtocolTypeRouter(
    {
        # A search whose client went away, or that runs when the server stops, is cancelled.
        "http": CancelOnDisconnect(django_asgi_app),
        "websocket": WebsocketOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
# Trusted-proxy headers and the request body cap, around everything (dashboard/security.py).
application = harden(application)
# SIGTERM under daphne: running searches stop at once, so the process exits within seconds.
watch_server_shutdown()
