"""Operable logs: with DASHBOARD_LOG_JSON=1 every line each real process writes is one JSON object.

The processes are the image's: `manage.py migrate`, the web server (`python -m console.serve`),
a Celery worker and beat against a private redis-server. Each runs with its output in files, is
stopped with SIGTERM, and then every line of its stdout and stderr must parse as JSON; the
access log's fields, the secrets it must not carry and the levels of a failing /readyz are read
from those lines.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.console.hostile_server import server_command, server_env
from tests.paths import ROOT, free_port

WAIT = 60.0
SECRET = "s3cret-query-value"
YAML_MARKER = "pod-yaml-that-must-not-be-logged"


def json_settings(**settings: str) -> dict[str, str]:
    return {"LOG_JSON": "1", "LOG_LEVEL": "INFO", "EMBEDDED_SYNC": "0", **settings}


def records(*paths: Path) -> list[dict[str, Any]]:
    """Every line of the files as JSON; fails naming the first line that is not."""
    parsed = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                pytest.fail(f"{path.name}:{number} is not JSON: {line!r}")
            assert isinstance(record, dict), line
            assert {"time", "level", "logger", "message"} <= record.keys(), line
            parsed.append(record)
    return parsed


class Process:
    """A process whose stdout and stderr go to files, stopped with SIGTERM."""

    def __init__(self, argv: list[str], env: dict[str, str], directory: Path, name: str) -> None:
        self.stdout = directory / f"{name}.stdout"
        self.stderr = directory / f"{name}.stderr"
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=err)

    def wait_for(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not check():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"{what}; stderr: {self.stderr.read_text()[-3000:]}")
            time.sleep(0.1)

    def logged(self, text: str) -> bool:
        return text in self.stderr.read_text() or text in self.stdout.read_text()

    def stop(self) -> list[dict[str, Any]]:
        self.popen.send_signal(signal.SIGTERM)
        self.popen.wait(timeout=WAIT)
        return records(self.stdout, self.stderr)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("process-logs")


@pytest.fixture(scope="module")
def migrated(var_dir: Path) -> list[dict[str, Any]]:
    """`manage.py migrate` (the entrypoint's migrate arm) on a fresh database, JSON on."""
    out, err = var_dir / "migrate.stdout", var_dir / "migrate.stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=server_env(var_dir, **json_settings()),
            stdout=stdout,
            stderr=stderr,
            check=True,
            timeout=300,
        )
    return records(out, err)


def get(url: str, **headers: str) -> int:
    request = urllib.request.Request(url, headers={"User-Agent": "logs-test/1.0", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_migrate_logs_its_progress_as_json(migrated) -> None:
    """Each line migrate prints is an INFO record: its plan and every migration applied."""
    messages = [r["message"] for r in migrated if r["logger"] == "dashboard.migrate"]
    assert messages[0] == "Operations to perform:"
    assert "Applying contenttypes.0001_initial... OK" in messages
    assert all(r["level"] == "INFO" for r in migrated if r["logger"] == "dashboard.migrate")


def test_web_server_lines_are_json_with_an_access_log_and_one_readiness_warning(
    migrated, var_dir: Path
) -> None:
    """Requests answered 200, 404 and 503 give one access record each with its fields and no
    secret; three failing /readyz probes give one WARNING and no ERROR."""
    kubeconfig = var_dir / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    port = free_port()
    env = server_env(var_dir, **json_settings(KUBECONFIG=str(kubeconfig), READY_MAX_WATCH_AGE="30"))
    server = Process(server_command(port), env, var_dir, "web")
    try:
        base = f"http://127.0.0.1:{port}"
        server.wait_for(lambda: server.logged("Uvicorn running"), "the server did not start")
        assert get(base + "/healthz") == 200
        assert get(base + f"/no-such-page/?token={SECRET}&page=2") == 404
        assert [get(base + "/readyz") for _ in range(3)] == [503, 503, 503]
        assert get(base + f"/accounts/reset/MQ/{SECRET}/") == 404  # reset is off without mail
        lines = server.stop()
    finally:
        server.kill()

    access = [r for r in lines if r["logger"] == "dashboard.access"]
    by_path = {r["path"]: r for r in access}
    assert [r["status"] for r in access] == [200, 404, 503, 503, 503, 404]
    healthz = by_path["/healthz"]
    assert healthz["method"] == "GET" and healthz["query"] == ""
    assert healthz["client"] == "127.0.0.1" and healthz["user_agent"] == "logs-test/1.0"
    assert isinstance(healthz["duration_ms"], float) and healthz["duration_ms"] >= 0
    assert by_path["/no-such-page/"]["query"] == "token=REDACTED&page=2"
    assert "/accounts/reset/MQ/REDACTED/" in by_path
    assert not [line for line in lines if SECRET in json.dumps(line)]

    readiness = [r for r in lines if r["logger"] == "console.health"]
    assert [(r["level"], r["failing"]) for r in readiness] == [("WARNING", ["watchers"])]
    assert not [r for r in lines if r["level"] in {"ERROR", "CRITICAL"}]


def test_worker_and_beat_lines_are_json_and_a_job_request_is_not_logged(
    migrated, var_dir: Path, redis_server: str
) -> None:
    """A worker (started without --quiet) and beat write JSON only: no banner, the shutdown
    notice as a record; a what-if job's YAML appears in no line at INFO."""
    env = server_env(var_dir, **json_settings(REDIS_URL=redis_server))
    celery = str(Path(sys.executable).parent / "celery")
    worker = Process(
        [celery, "-A", "dashboard", "worker", "--loglevel", "INFO", "--queues", "celery"]
        + ["--pool", "threads", "--concurrency", "2", "--hostname", "logs-test@%h"],
        env,
        var_dir,
        "worker",
    )
    beat = Process(
        [celery, "-A", "dashboard", "--quiet", "beat", "--loglevel", "INFO"]
        + ["--scheduler", "django_celery_beat.schedulers:DatabaseScheduler"],
        env,
        var_dir,
        "beat",
    )
    try:
        worker.wait_for(lambda: worker.logged("ready."), "the worker did not start")
        beat.wait_for(lambda: beat.logged("beat: Starting"), "beat did not start")
        queue_job = (
            "import django; django.setup()\n"
            "from claims.tasks import queue_what_if_job\n"
            "from claims.whatif.jobs import create_job\n"
            f"pods = 'apiVersion: v1\\nkind: Pod\\nmetadata: {{name: {YAML_MARKER}}}'\n"
            "print(create_job({'pods': pods}, queue=queue_what_if_job)['id'])\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", queue_job],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=WAIT,
        )
        assert done.stdout.strip() and YAML_MARKER not in done.stderr
        worker.wait_for(
            lambda: worker.logged("run_what_if_job") and worker.logged("succeeded in"),
            "the job did not run",
        )
        worker_lines = worker.stop()
        beat_lines = beat.stop()
    finally:
        worker.kill()
        beat.kill()

    messages = [r["message"] for r in worker_lines]
    assert any(m.startswith("worker logs-test@") and "starting" in m for m in messages)
    assert "worker: Warm shutdown (MainProcess)" in messages
    tasks = [r["task"] for r in worker_lines if "task" in r]
    assert {t["name"] for t in tasks} == {"claims.tasks.run_what_if_job"}
    assert all(set(t) <= {"id", "name", "runtime", "eta"} for t in tasks)
    assert not [r for r in worker_lines if YAML_MARKER in json.dumps(r)]
    assert [r["message"] for r in beat_lines if r["logger"] == "celery.beat"][0] == (
        "beat: Starting..."
    )
