"""The dashboard's ASGI app plus one test-only control route, for the browser tests only.

The in-memory channel layer lives in one process, so a change must be applied inside the
server process to reach its websockets: POST /__test__/sync {"kind", "objects", "deleted"?} runs
the normal sync write path (`inventory.sync.apply_events`) there. Never imported by the product.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async

from console.asgi import application as dashboard_application

CONTROL_PATH = "/__test__/sync"


def _apply(payload: dict[str, Any]) -> dict[str, Any]:
    from inventory.clusters import in_cluster
    from inventory.sync import apply_events

    event = "DELETED" if payload.get("deleted") else "MODIFIED"
    with in_cluster():
        result = apply_events(str(payload["kind"]), [(event, raw) for raw in payload["objects"]])
    return {"upserted": result.upserted, "deleted": result.deleted, "skipped": result.skipped}


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == CONTROL_PATH and scope["method"] == "POST":
        payload = json.loads(await _read_body(receive))
        answer = json.dumps(await sync_to_async(_apply)(payload)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer})
        return
    await dashboard_application(scope, receive, send)
