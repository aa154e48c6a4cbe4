"""The console: the top layer. Overview, what-if page, sync status, health, metrics, embedded mode,
live-update scoping, and the root URLconf, ASGI and websocket routing that tie the apps together."""
