"""ASGI entry point: HTTP through Django, websockets through Channels (same-origin, signed in)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from dashboard.security import WebsocketOriginValidator, harden  # noqa: E402

if settings.EMBEDDED_SYNC:
    from console import embedded

    embedded.start()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": WebsocketOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
# Trusted-proxy headers and the request body cap, around everything (dashboard/security.py).
application = harden(application)
