"""What the fake API server writes and reads as kube-apiserver does: Status bodies, continue
tokens, compact JSON, chunks of a chunked response and the watch events of a selector-filtered
watch."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import orjson

from dralib.kube.fakeapi.selectors import Predicate, parse_field_selector, parse_label_selector
from dralib.kube.fakeapi.store import Change, Key, TooLarge

__all__ = [
    "CONTINUE_EXPIRED",
    "INCONSISTENT_CONTINUE",
    "decode_continue",
    "dumps",
    "encode_continue",
    "filtered",
    "framed",
    "line",
    "loads_body",
    "selector",
    "status_body",
    "too_large_details",
    "watch_event",
]


def loads_body(data: bytes) -> Any:
    """A request body as JSON (ValueError when it is not)."""
    return orjson.loads(data)


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A metav1.Status object, as the API server sends for errors."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def too_large_details(exc: TooLarge, *, retry_after: int) -> dict[str, Any]:
    """Status details of "Too large resource version" (storage.NewTooLargeResourceVersionError)."""
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return {"causes": [cause], "retryAfterSeconds": retry_after}


def encode_continue(revision: int, last: Key) -> str:
    """An opaque continue token: the list's snapshot revision and the last key it returned.

    Shaped like the API server's (base64 JSON without padding) so clients treat it as opaque.
    """
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": list(last)})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    """The snapshot revision and last returned key of a continue token, or ValueError."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        namespace, name = data["start"]
        return int(data["rv"]), (str(namespace), str(name))
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ValueError("continue key is not valid") from exc


def framed(data: bytes) -> bytes:
    """`data` as one chunk of a chunked response."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def dumps(body: dict[str, Any]) -> bytes:
    """Compact JSON, as the API server writes it."""
    try:
        return orjson.dumps(body)
    except TypeError:  # what orjson refuses (integers beyond 64 bits): as Go would, in full
        return json.dumps(body, separators=(",", ":")).encode()


def line(event: dict[str, Any]) -> bytes:
    return dumps(event) + b"\n"


def filtered(query: dict[str, str]) -> bool:
    return bool(query.get("labelSelector") or query.get("fieldSelector"))


def selector(query: dict[str, str]) -> Predicate:
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"))
    return lambda obj: labels(obj) and fields(obj)


def watch_event(change: Change, matches: Predicate) -> dict[str, Any] | None:
    """The watch event a change becomes for a selector-filtered watch, or None if unseen."""
    now = matches(change.object)
    before = change.previous is not None and matches(change.previous)
    if change.type == "DELETED":
        return {"type": "DELETED", "object": change.object} if before else None
    if now and before:
        return {"type": "MODIFIED", "object": change.object}
    if now:
        return {"type": "ADDED", "object": change.object}
    if before:
        # Leaving the selector looks like a deletion to this watcher.
        return {"type": "DELETED", "object": change.object}
    return None
