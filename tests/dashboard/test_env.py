"""The DASHBOARD_* readers fail loudly on bad values and read secrets from files."""

import pytest

from dashboard.env import (
    ConfigError,
    check_redis_url,
    env_bool,
    env_int,
    env_list,
    env_queue_name,
    env_str,
    parse_database_url,
)


def test_bool_accepts_kubernetes_style_spellings(monkeypatch):
    """1/true/yes/on and 0/false/no/off are booleans; anything else is an error."""
    for value, expected in [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]:
        monkeypatch.setenv("DASHBOARD_FLAG", value)
        assert env_bool("FLAG") is expected
    monkeypatch.setenv("DASHBOARD_FLAG", "maybe")
    with pytest.raises(ConfigError, match="DASHBOARD_FLAG"):
        env_bool("FLAG")


def test_int_checks_type_and_minimum(monkeypatch):
    """Integers parse, and a value below the minimum names the variable."""
    monkeypatch.setenv("DASHBOARD_N", "5")
    assert env_int("N", 1, minimum=1) == 5
    monkeypatch.setenv("DASHBOARD_N", "0")
    with pytest.raises(ConfigError, match="at least 1"):
        env_int("N", 1, minimum=1)
    monkeypatch.setenv("DASHBOARD_N", "five")
    with pytest.raises(ConfigError, match="expected an integer"):
        env_int("N", 1)


def test_secret_read_from_file(monkeypatch, tmp_path):
    """A *_FILE variable wins over the plain variable, as container secrets expect."""
    secret = tmp_path / "key"
    secret.write_text("from-file\n")
    monkeypatch.setenv("DASHBOARD_SECRET", "plain")
    monkeypatch.setenv("DASHBOARD_SECRET_FILE", str(secret))
    assert env_str("SECRET") == "from-file"
    monkeypatch.setenv("DASHBOARD_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="cannot read"):
        env_str("SECRET")


def test_list_splits_and_trims(monkeypatch):
    """Comma-separated lists drop blanks."""
    monkeypatch.setenv("DASHBOARD_HOSTS", " a.example.com, ,b ")
    assert env_list("HOSTS", []) == ["a.example.com", "b"]


def test_queue_name_is_one_celery_queue(monkeypatch):
    """A queue name is taken as given; a list or a blank-containing name names the variable."""
    assert env_queue_name("QUEUE", "watchers") == "watchers"
    monkeypatch.setenv("DASHBOARD_QUEUE", " watchers-eu.1 ")
    assert env_queue_name("QUEUE", "watchers") == "watchers-eu.1"
    for bad in ("celery,watchers", "two words", "-leading-dash"):
        monkeypatch.setenv("DASHBOARD_QUEUE", bad)
        with pytest.raises(ConfigError, match="DASHBOARD_QUEUE: expected a queue name"):
            env_queue_name("QUEUE", "watchers")


def test_database_urls():
    """PostgreSQL and SQLite URLs become Django settings; others are rejected."""
    pg = parse_database_url("postgres://user:p%40ss@db.local:5433/dash")
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"], pg["NAME"]) == (
        "user",
        "p@ss",
        "db.local",
        "5433",
        "dash",
    )
    assert parse_database_url("sqlite:////tmp/x.sqlite3")["NAME"] == "/tmp/x.sqlite3"
    assert parse_database_url("sqlite:///var/x.sqlite3")["NAME"] == "var/x.sqlite3"
    with pytest.raises(ConfigError, match="unsupported scheme"):
        parse_database_url("mysql://x/y")
    with pytest.raises(ConfigError, match="no database name"):
        parse_database_url("postgres://host/")


def test_redis_url_scheme_checked():
    """Only redis, rediss and unix URLs are accepted."""
    assert check_redis_url("redis://127.0.0.1:6379/0").startswith("redis://")
    with pytest.raises(ConfigError):
        check_redis_url("http://127.0.0.1:6379")


def test_secret_key_placeholder_and_short_keys_refused(tmp_path):
    """The example placeholder and short keys stop the process with a clear message."""
    from dashboard.env import check_secret_key

    with pytest.raises(ConfigError, match="SECRET_KEY"):
        check_secret_key("CHANGE-ME-long-random-secret", var_dir=tmp_path)
    with pytest.raises(ConfigError, match="at least 32"):
        check_secret_key("short", var_dir=tmp_path)
    good = "k" * 40
    assert check_secret_key(good, var_dir=tmp_path) == good


def test_secret_key_generated_once_and_private(tmp_path):
    """Without a configured key, one is generated into the var dir, private, and reused."""
    import stat

    from dashboard.env import check_secret_key

    first = check_secret_key("", var_dir=tmp_path)
    second = check_secret_key("", var_dir=tmp_path)
    assert first == second
    assert len(first) >= 50
    mode = stat.S_IMODE((tmp_path / "secret_key").stat().st_mode)
    assert mode == 0o600
