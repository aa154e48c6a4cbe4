"""var/ is 0700 and the SQLite database with its WAL files 0600, whatever the umask."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from dashboard.env import private_dir, private_sqlite_file

ROOT = Path(settings.BASE_DIR)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run_manage(var_dir: Path, *args: str, **extra: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASHBOARD_")}
    env.update(
        DASHBOARD_VAR_DIR=str(var_dir),
        DASHBOARD_SECRET_KEY="test-only-secret-key-never-used-outside-the-test-suite",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    # A permissive umask, as on many desktops: the modes must not depend on it.
    subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


def test_first_migrate_creates_a_private_var_and_database(tmp_path: Path) -> None:
    """`manage.py migrate` on a fresh VAR_DIR leaves it 0700 and the database 0600."""
    var_dir = tmp_path / "var"
    run_manage(var_dir, "migrate", "--noinput")
    database = var_dir / "dashboard.sqlite3"
    assert mode(var_dir) == 0o700
    assert mode(database) == 0o600
    assert database.stat().st_size > 0
    assert not (var_dir / "secret_key").exists()  # the key was given


def test_wal_files_follow_the_database_mode(tmp_path: Path) -> None:
    """SQLite creates -wal and -shm with the database file's mode, not the umask's."""
    database = private_sqlite_file(private_dir(tmp_path / "var") / "dashboard.sqlite3")
    old = os.umask(0o022)
    try:
        connection = sqlite3.connect(database)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE t (x)")
        connection.execute("INSERT INTO t VALUES (1)")
        connection.commit()
        wal, shm = Path(f"{database}-wal"), Path(f"{database}-shm")
        assert wal.exists() and shm.exists()
        assert mode(wal) == mode(shm) == 0o600
        connection.close()
    finally:
        os.umask(old)


def test_loose_modes_left_by_an_earlier_run_are_tightened(tmp_path: Path) -> None:
    """Loading the settings takes group and other bits off var/, the database and its WAL."""
    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o755)
    os.chmod(var_dir, 0o755)
    files = [var_dir / name for name in ("dashboard.sqlite3", "dashboard.sqlite3-wal")]
    for path in files:
        path.touch()
        os.chmod(path, 0o644)
    run_manage(var_dir, "check")
    assert mode(var_dir) == 0o700
    assert [mode(path) for path in files] == [0o600, 0o600]


def test_a_generated_secret_key_lands_in_a_private_var(tmp_path: Path) -> None:
    """Without a configured key the generated one is written 0600 into a 0700 VAR_DIR."""
    var_dir = tmp_path / "state"
    run_manage(var_dir, "check", DASHBOARD_SECRET_KEY="")
    assert mode(var_dir) == 0o700
    assert mode(var_dir / "secret_key") == 0o600


def test_a_sqlite_database_url_is_private_too(tmp_path: Path) -> None:
    """A database named by DASHBOARD_DATABASE_URL=sqlite:///... is created 0600 as well."""
    database = tmp_path / "elsewhere.sqlite3"
    run_manage(tmp_path / "var", "check", DASHBOARD_DATABASE_URL=f"sqlite:///{database}")
    assert mode(database) == 0o600
