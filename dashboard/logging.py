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

`configure` is settings.LOGGING_CONFIG: besides applying LOGGING it routes what Python would print
past logging (warnings, uncaught exceptions) through it, so with JSON on every line is one record.
`LineLogger` turns a command's printed output into records (`manage.py migrate`).
"""

from __future__ import annotations

import io
import json
import logging
import logging.config
import sys
import threading
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from dashboard.access_log import redact_path

OBJECT_FIELDS = ("kind", "namespace", "name")

_current: ContextVar[tuple[str, str, str] | None] = ContextVar("dashboard_log_object", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged.
_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "object_suffix", "taskName"}
)
# uvicorn's copy of the message with terminal colours: noise in a log pipeline.
_DROPPED_EXTRAS = frozenset({"color_message"})
# What Celery's task lines (received, succeeded, failed) carry in `extra={"data": ...}` that may be
# logged: never the task's arguments, keyword arguments or return value, which for a what-if job
# are the user's pod YAML (the message names the task and its id; a failure's traceback is `exc`).
_CELERY_TASK_FIELDS = ("id", "name", "runtime", "eta", "hostname", "description", "internal")


def object_extra(*, kind: str, namespace: str = "", name: str) -> dict[str, str]:
    """The `extra=` mapping that names one Kubernetes object on a single log call.

    The object name travels as `object_name`: a LogRecord's `name` is the logger's name.
    """
    return {"kind": kind, "namespace": namespace, "object_name": name}


class object_context:  # lower case: it replaced a function, and reads as one in `with`
    """Name the object every log line inside the block is about (nesting: innermost wins).

    A class rather than a generator context manager: the sync enters one per object it reads,
    and entering sets a ContextVar to a tuple and nothing more; the fields a record carries are
    built by `ObjectContextFilter` only when a line is emitted.
    """

    __slots__ = ("_object", "_token")

    def __init__(self, *, kind: str, namespace: str = "", name: str) -> None:
        self._object = (kind, namespace or "", name)

    def __enter__(self) -> None:
        self._token = _current.set(self._object)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _current.reset(self._token)


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
            if key in _DROPPED_EXTRAS:
                continue
            if key == "data" and record.name.startswith("celery.") and isinstance(value, Mapping):
                entry["task"] = {k: _jsonable(value[k]) for k in _CELERY_TASK_FIELDS if k in value}
                continue
            if key == "request" and hasattr(value, "method") and hasattr(value, "path"):
                # Django's request lines pass the request; its repr has the query string, which
                # may hold a token: the path only, redacted as the access log does.
                entry[key] = {"method": value.method, "path": redact_path(value.path)}
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


def configure(config: Mapping[str, Any]) -> None:
    """Apply a LOGGING dict, then route what bypasses logging through it (LOGGING_CONFIG).

    Django calls this in every process that sets it up: web, worker, beat, manage.py. Python
    warnings and uncaught exceptions, which Python prints as plain multi-line text, become one
    record each; an exception's traceback is the record's `exc_info` (one JSON line, `exc`).
    """
    logging.config.dictConfig(dict(config))
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    logging.getLogger("dashboard.uncaught").critical(
        "uncaught %s: %s", exc_type.__name__, exc, exc_info=(exc_type, exc, tb)
    )


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:  # as Python's own hook: a thread may end itself this way
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("dashboard.uncaught").error(
        "uncaught %s in thread %s: %s",
        args.exc_type.__name__,
        name,
        args.exc_value,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
    )


class LineLogger(io.TextIOBase):
    """A text stream that logs each line written to it, for output a command prints.

    A line is logged once its newline arrives (`migrate` writes "Applying x..." and " OK" apart);
    blank lines are dropped and leading indentation is stripped.
    """

    def __init__(self, logger: logging.Logger, level: int = logging.INFO) -> None:
        super().__init__()
        self._logger = logger
        self._level = level
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def close(self) -> None:
        if not self.closed:
            self._emit(self._pending)
            self._pending = ""
        super().close()

    def _emit(self, line: str) -> None:
        if line.strip():
            self._logger.log(self._level, "%s", line.strip())
