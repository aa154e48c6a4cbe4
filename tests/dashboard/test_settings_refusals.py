"""Settings refuse what they cannot use safely: placeholders, Redis off this host without a
password; and a database URL's query options reach psycopg instead of being dropped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dashboard.env import ConfigError, check_redis_url, parse_database_url
from tests.paths import ROOT

GOOD_KEY = "k" * 40


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret-password@redis:6379/0",
        "rediss://user:s3cret-password@redis.example.com:6380/1",
        "redis://redis:6379/0?password=s3cret-password",
        "redis://127.0.0.1:6379/0",
        "redis://localhost:6379/0",
        "redis://[::1]:6379/0",
        "unix:///run/redis/redis.sock?db=0",
    ],
)
def test_redis_urls_with_a_password_or_on_this_host_are_accepted(url: str) -> None:
    """A password, or a server only this host can reach (loopback, a unix socket)."""
    assert check_redis_url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "redis://redis:6379/0",
        "rediss://redis.example.com:6380/0",
        "redis://user@10.0.0.5:6379/0",
        "redis://:@dra-dashboard-redis:6379/0",
    ],
)
def test_redis_off_this_host_without_a_password_is_refused(url: str) -> None:
    """Whoever can write to that Redis could send live events and queue tasks: no password, no."""
    with pytest.raises(ConfigError, match="DASHBOARD_REDIS_URL: no password"):
        check_redis_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:CHANGE-ME-redis-password@dra-dashboard-redis:6379/0",
        "redis://:CHANGE-ME-redis-password@127.0.0.1:6379/0",
        "redis://127.0.0.1:6379/0?password=changeme",
    ],
)
def test_a_placeholder_redis_password_is_refused_anywhere(url: str) -> None:
    """The example's password is refused, on loopback too."""
    with pytest.raises(ConfigError, match="placeholder"):
        check_redis_url(url)


def test_database_url_query_options_reach_psycopg() -> None:
    """`?sslmode=verify-full` and friends become OPTIONS; `options` keeps the JIT off."""
    database = parse_database_url(
        "postgres://dash:pw@db.example.com:5432/dash?sslmode=verify-full"
        "&sslrootcert=/etc/ssl/ca.pem&connect_timeout=5&options=-c%20statement_timeout%3D5000"
    )
    assert database["OPTIONS"] == {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ssl/ca.pem",
        "connect_timeout": "5",
        "options": "-c statement_timeout=5000 -c jit=off",
    }
    plain = parse_database_url("postgres://dash:pw@db:5432/dash")
    assert plain["OPTIONS"] == {"options": "-c jit=off"}


def test_database_url_query_may_give_what_the_url_leaves_out() -> None:
    """A unix-socket host as libpq spells it (`?host=/run/postgresql`) fills HOST, not OPTIONS."""
    database = parse_database_url("postgres://dash@/dash?host=/run/postgresql&sslmode=disable")
    assert database["HOST"] == "/run/postgresql"
    assert database["OPTIONS"] == {"sslmode": "disable", "options": "-c jit=off"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres://dash:pw@db/dash?sslmod=require", 'invalid connection option "sslmod"'),
        ("postgres://dash:pw@db/dash?sslmode=require&sslmode=disable", "'sslmode' is given twice"),
        ("postgres://dash:pw@db/dash?host=other", "'host' is given twice"),
        ("postgres://dashboard:CHANGE-ME@db/dash", "placeholder"),
        ("sqlite:///var/x.sqlite3?mode=ro", "SQLite URLs take no query options"),
    ],
)
def test_database_url_mistakes_are_refused(url: str, message: str) -> None:
    """A misspelt or doubled option, a placeholder password, a query on SQLite: refused."""
    with pytest.raises(ConfigError, match=message):
        parse_database_url(url)


def settings_error(tmp_path: Path, **variables: str) -> str:
    """Load the settings module in a fresh interpreter with `variables`; its error output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASHBOARD_")}
    env.update(
        {
            "DASHBOARD_VAR_DIR": str(tmp_path),
            "DASHBOARD_SECRET_KEY": GOOD_KEY,
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "PYTHONPATH": str(ROOT),
            **variables,
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", "import dashboard.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if done.returncode == 0 else done.stderr


def test_every_placeholder_the_kubernetes_secret_ships_stops_the_settings(tmp_path) -> None:
    """Each DASHBOARD_* value of deploy/secret.yaml, set as it ships, stops the process."""
    [secret] = [
        doc
        for doc in yaml.safe_load_all((ROOT / "deploy/secret.yaml").read_text())
        if doc["metadata"]["name"] == "dra-dashboard"
    ]
    values = secret["stringData"]
    assert set(values) >= {"DASHBOARD_SECRET_KEY", "DASHBOARD_REDIS_URL"}
    for name, value in values.items():
        error = settings_error(tmp_path, **{name: value})
        assert "ConfigError" in error and name in error, (name, error[-500:])
    assert settings_error(tmp_path, DASHBOARD_EMAIL_HOST_PASSWORD="changeme") != ""


def test_settings_start_with_real_values(tmp_path) -> None:
    """The same settings load with real-looking values (the refusals are not blanket)."""
    assert (
        settings_error(
            tmp_path,
            DASHBOARD_REDIS_URL="redis://:a-real-password@redis:6379/0",
            DASHBOARD_METRICS_TOKEN="a-real-token-0123456789",
            DASHBOARD_DATABASE_URL="postgres://dash:pw@db:5432/dash?sslmode=verify-full",
        )
        == ""
    )
