"""Structured logging: a JSON formatter and the Kubernetes object a log line is about.

Sync code names the object it works on in one of three ways, and every handler configured with
`ObjectContextFilter` then carries `kind`, `namespace` and `name` on the record (JSON fields with
`DASHBOARD_LOG_JSON=1`, a ``kind=… namespace=… name=…`` suffix in the plain format):

    with object_context(kind="ResourceSlice", namespace="", name="node-1-gpu"):
        log.warning("skipped: %s", error)          # every line inside the block

    extra = object_extra(kind="Pod", namespace="team-a", name="trainer-0")
    log.warning("skipped", extra=extra)            # one line

    log = ObjectLogger(logging.getLogger(__name__), kind="Pod", namespace="a", name="b")

The context is a ContextVar, so it follows asyncio tasks and threads without leaking between them.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

OBJECT_FIELDS = ("kind", "namespace", "name")

_current: ContextVar[tuple[str, str, str] | None] = ContextVar("dashboard_log_object", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged.
_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "object_suffix", "taskName"}
)


def object_extra(*, kind: str, namespace: str = "", name: str) -> dict[str, str]:
    """The `extra=` mapping that names one Kubernetes object on a single log call.

    The object name travels as `object_name`: a LogRecord's `name` is the logger's name.
    """
    return {"kind": kind, "namespace": namespace, "object_name": name}


@contextlib.contextmanager
def object_context(*, kind: str, namespace: str = "", name: str) -> Iterator[None]:
    """Name the object every log line inside the block is about (nesting: innermost wins)."""
    token = _current.set((kind, namespace or "", name))
    try:
        yield
    finally:
        _current.reset(token)


def current_object() -> dict[str, str] | None:
    """The object named by the innermost `object_context`, if any."""
    value = _current.get()
    return None if value is None else dict(zip(OBJECT_FIELDS, value, strict=True))


class ObjectLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger adapter whose every line names one object; an explicit `extra=` still wins."""

    def __init__(self, logger: logging.Logger, *, kind: str, namespace: str, name: str) -> None:
        super().__init__(logger, object_extra(kind=kind, namespace=namespace, name=name))

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


class ObjectContextFilter(logging.Filter):
    """Copy the current object onto records that lack one and build the plain-format suffix.

    Attach it to handlers (not loggers) so records from every logger pass through it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        if not fields.get("kind"):
            current = _current.get()
            if current is not None:
                fields["kind"], fields["namespace"], fields["object_name"] = current
        if fields.get("kind"):
            fields.setdefault("namespace", "")
            fields.setdefault("object_name", "")
            record.object_suffix = (
                f" kind={fields['kind']} namespace={fields['namespace'] or '-'}"
                f" name={fields['object_name']}"
            )
        else:
            record.object_suffix = ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, object fields, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        # Also works on a handler configured without the filter.
        ObjectContextFilter().filter(record)
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = record.__dict__
        if fields.get("kind"):
            entry["kind"] = fields["kind"]
            entry["namespace"] = fields.get("namespace") or ""
            entry["name"] = fields.get("object_name") or ""
        for key, value in fields.items():
            if key in _STANDARD_ATTRS or key in entry or key in {"namespace", "object_name"}:
                continue
            entry[key] = _jsonable(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return str(value)
