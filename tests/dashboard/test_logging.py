"""Structured logs: the JSON formatter and the object a log line is about."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from dashboard.access_log import MAX_QUERY, redact_path, redact_query
from dashboard.logging import (
    JsonFormatter,
    LineLogger,
    ObjectContextFilter,
    ObjectLogger,
    current_object,
    object_context,
    object_extra,
)
from tests.paths import ROOT


@pytest.fixture
def stream_logger() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    """A private logger writing through a handler configured like settings.LOGGING's stderr."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ObjectContextFilter())
    logger = logging.getLogger("tests.console.logging")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, stream, handler
    logger.handlers = []


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_carries_the_object_of_the_context(stream_logger) -> None:
    """Inside object_context every line has kind, namespace and name; outside none."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    with object_context(kind="ResourceClaim", namespace="team-a", name="trainer-0"):
        logger.warning("pending for %ds", 30)
    logger.info("no object")
    inside, outside = json_lines(stream)
    assert inside["message"] == "pending for 30s"
    assert inside["level"] == "WARNING"
    assert inside["logger"] == "tests.console.logging"
    assert (inside["kind"], inside["namespace"], inside["name"]) == (
        "ResourceClaim",
        "team-a",
        "trainer-0",
    )
    assert "kind" not in outside and outside["message"] == "no object"


def test_nested_contexts_innermost_wins_and_restore(stream_logger) -> None:
    """A nested context names its object and the outer one comes back after it."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    with object_context(kind="ResourceSlice", namespace="", name="node-a-gpu"):
        with object_context(kind="Pod", namespace="team-b", name="job-1"):
            logger.info("inner")
        logger.info("outer")
    inner, outer = json_lines(stream)
    assert (inner["kind"], inner["name"]) == ("Pod", "job-1")
    assert (outer["kind"], outer["namespace"], outer["name"]) == ("ResourceSlice", "", "node-a-gpu")
    assert current_object() is None


def test_context_does_not_leak_into_other_threads(stream_logger) -> None:
    """A context set in one thread is invisible in another."""
    seen: list[dict[str, str] | None] = []
    with object_context(kind="Node", namespace="", name="node-a"):
        thread = threading.Thread(target=lambda: seen.append(current_object()))
        thread.start()
        thread.join()
        assert current_object() == {"kind": "Node", "namespace": "", "name": "node-a"}
    assert seen == [None]


def test_context_ends_when_the_block_raises(stream_logger) -> None:
    """An exception out of the block resets the object (the sync's per-object `with`), the
    exception goes on, and a line logged while it is handled inside names the object."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    with pytest.raises(KeyError), object_context(kind="Pod", namespace="team-a", name="bad"):
        try:
            raise KeyError("spec")
        except KeyError:
            logger.exception("skipped")
            raise
    assert current_object() is None
    (line,) = json_lines(stream)
    assert (line["kind"], line["namespace"], line["name"]) == ("Pod", "team-a", "bad")
    assert "KeyError" in str(line["exc"])


def test_extra_and_adapter_name_the_object(stream_logger) -> None:
    """object_extra for one call and ObjectLogger for many; other extras stay as JSON fields."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    logger.info("one", extra=object_extra(kind="DeviceClass", namespace="", name="gpu.example.com"))
    adapter = ObjectLogger(logger, kind="Pod", namespace="team-a", name="trainer-0")
    adapter.info("two", extra={"resource_version": "42"})
    one, two = json_lines(stream)
    assert (one["kind"], one["namespace"], one["name"]) == ("DeviceClass", "", "gpu.example.com")
    assert (two["kind"], two["namespace"], two["name"]) == ("Pod", "team-a", "trainer-0")
    assert two["resource_version"] == "42"


def test_json_line_includes_the_exception(stream_logger) -> None:
    """logger.exception puts the traceback in `exc`, still one JSON line."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    try:
        raise ValueError("spec.devices[0].name: required")
    except ValueError:
        logger.exception("skipped")
    (line,) = json_lines(stream)
    assert "ValueError: spec.devices[0].name: required" in str(line["exc"])


def test_plain_format_gets_an_object_suffix(stream_logger, settings) -> None:
    """The plain formatter of settings.LOGGING ends lines with kind=… namespace=… name=…."""
    logger, stream, handler = stream_logger
    handler.setFormatter(logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"]))
    with object_context(kind="ResourceSlice", namespace="", name="node-a-gpu"):
        logger.info("listed")
    logger.info("idle")
    first, second = stream.getvalue().splitlines()
    assert first.endswith(
        " INFO tests.console.logging listed kind=ResourceSlice namespace=- name=node-a-gpu"
    )
    assert second.endswith(" INFO tests.console.logging idle")


def test_settings_pick_the_json_formatter_when_asked(settings) -> None:
    """LOGGING routes stderr through the object filter; Celery keeps that configuration."""
    stderr = settings.LOGGING["handlers"]["stderr"]
    assert settings.LOGGING["root"]["handlers"] == ["stderr"]
    assert stderr["filters"] == ["object_context", "redact_path"]
    assert settings.LOGGING_CONFIG == "dashboard.logging.configure"
    assert stderr["formatter"] == ("json" if settings.LOG_JSON else "plain")
    assert settings.LOGGING["formatters"]["json"]["()"] == "dashboard.logging.JsonFormatter"
    # Celery would otherwise replace the root handlers with its own format in workers and beat.
    assert settings.CELERY_WORKER_HIJACK_ROOT_LOGGER is False


def test_log_json_setting_makes_every_line_json() -> None:
    """A process started with DASHBOARD_LOG_JSON=1 writes JSON lines naming the object."""
    code = (
        "import django, logging; django.setup(); "
        "from dashboard.logging import object_context; "
        "ctx = object_context(kind='ResourceSlice', namespace='', name='node-a-gpu'); "
        "ctx.__enter__(); "
        "logging.getLogger('inventory.sync').warning('skipped')"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DASHBOARD_")},
        "DASHBOARD_LOG_JSON": "1",
        "DASHBOARD_SECRET_KEY": "test-only-secret-key-never-used-outside-the-test-suite",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    (line,) = [json.loads(text) for text in result.stderr.splitlines()]
    assert (line["logger"], line["message"]) == ("inventory.sync", "skipped")
    assert (line["kind"], line["namespace"], line["name"]) == ("ResourceSlice", "", "node-a-gpu")


def test_celery_task_lines_keep_the_task_not_its_arguments(stream_logger) -> None:
    """Celery's `data` extra is logged as `task` without args, kwargs or return value."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    celery_logger = logging.getLogger("celery.app.trace")
    celery_logger.handlers, celery_logger.propagate = [handler], False
    try:
        data = {
            "id": "42",
            "name": "claims.tasks.run_what_if_job",
            "args": "('42', {'yaml': 'kind: Pod'})",
            "kwargs": "{}",
            "return_value": "'done'",
            "runtime": 0.5,
        }
        celery_logger.info("Task %(name)s[%(id)s] succeeded", data, extra={"data": data})
    finally:
        celery_logger.handlers, celery_logger.propagate = [], True
    (line,) = json_lines(stream)
    assert line["task"] == {"id": "42", "name": "claims.tasks.run_what_if_job", "runtime": 0.5}
    assert "data" not in line and "kind: Pod" not in json.dumps(line)


def test_uvicorn_colour_copies_are_dropped(stream_logger) -> None:
    """uvicorn's `color_message` extra (the message with terminal colours) is not logged."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    logger.info("Started server process [%d]", 7, extra={"color_message": "\x1b[36m%d\x1b[0m"})
    (line,) = json_lines(stream)
    assert line["message"] == "Started server process [7]" and "color_message" not in line


def test_line_logger_logs_each_printed_line(stream_logger) -> None:
    """Lines written in pieces are logged once complete; blank lines are dropped."""
    logger, stream, handler = stream_logger
    handler.setFormatter(JsonFormatter())
    out = LineLogger(logger)
    out.write("Running migrations:\n  Applying app.0001_initial...")
    out.write(" OK\n\n")
    out.write("No newline at the end")
    out.close()
    assert [(r["level"], r["message"]) for r in json_lines(stream)] == [
        ("INFO", "Running migrations:"),
        ("INFO", "Applying app.0001_initial... OK"),
        ("INFO", "No newline at the end"),
    ]


@pytest.mark.parametrize(
    ("query", "logged"),
    [
        ("", ""),
        ("page=2&ordering=-name", "page=2&ordering=-name"),
        ("token=abc&page=2", "token=REDACTED&page=2"),
        ("next=/&password=hunter2", "next=/&password=REDACTED"),
        (
            "api_key=1&client_secret=2&Access_Token=3",
            "api_key=1&client_secret=REDACTED&Access_Token=REDACTED",
        ),
        ("code=c0de&state=n0nce", "code=REDACTED&state=REDACTED"),
        ("error=access_denied&state=n0nce", "error=access_denied&state=REDACTED"),
        ("state=pending&namespace=team-a", "state=pending&namespace=team-a"),
        ("token", "token"),
    ],
)
def test_redact_query(query: str, logged: str) -> None:
    """Credential-looking values are replaced; `state` only in an authorization response."""
    assert redact_query(query) == logged


def test_redact_query_is_bounded() -> None:
    """A query string of any length is logged cut to MAX_QUERY characters."""
    assert len(redact_query("a=" + "x" * 100_000)) == MAX_QUERY + len("...")


def test_redact_path_replaces_secret_url_segments() -> None:
    """Segments the URLconf captures as a token are replaced; other paths are kept."""
    assert redact_path("/accounts/reset/MQ/c0ffee-token/") == "/accounts/reset/MQ/REDACTED/"
    assert redact_path("/what-if/shared/abcdef123/") == "/what-if/shared/REDACTED/"
    assert redact_path("/claims/team-a/token/") == "/claims/team-a/token/"
    assert redact_path("/no/such/page/") == "/no/such/page/"


def test_uncaught_exceptions_and_warnings_are_single_json_lines() -> None:
    """A warning, an exception a thread did not catch and one that ends the process are each
    one JSON line with the traceback in `exc`."""
    code = (
        "import django, threading, warnings; django.setup()\n"
        "warnings.warn('deprecated thing', DeprecationWarning)\n"
        "def fail(): raise ValueError('in a thread')\n"
        "thread = threading.Thread(target=fail, name='worker-1'); thread.start(); thread.join()\n"
        "raise RuntimeError('at the top')\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DASHBOARD_")},
        "DASHBOARD_LOG_JSON": "1",
        "DASHBOARD_SECRET_KEY": "test-only-secret-key-never-used-outside-the-test-suite",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "PYTHONWARNINGS": "default",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 1 and result.stdout == ""
    warning, thread, top = [json.loads(text) for text in result.stderr.splitlines()]
    assert (warning["logger"], warning["level"]) == ("py.warnings", "WARNING")
    assert "DeprecationWarning: deprecated thing" in warning["message"]
    assert (thread["logger"], thread["level"]) == ("dashboard.uncaught", "ERROR")
    assert "worker-1" in thread["message"] and "ValueError: in a thread" in thread["exc"]
    assert (top["level"], top["message"]) == ("CRITICAL", "uncaught RuntimeError: at the top")
    assert top["exc"].startswith("Traceback") and "RuntimeError: at the top" in top["exc"]
