"""The container image, without Docker: /app is assembled from the Dockerfile's own COPY lines and
its build step runs as written; then the entrypoint's processes start from those files alone, with
the settings the Kubernetes manifests give them."""

from __future__ import annotations

import json
import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib.util import cache_from_source
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.deploy.image import DockerIgnore, Image, ImageError, probe_allowed_roots
from tests.deploy.test_manifests import one
from tests.paths import ROOT

WEB_PROBE = """
import importlib, json, sys
module, _, attribute = sys.argv[1].partition(":")
application = getattr(importlib.import_module(module), attribute)
assert callable(application), application
files = {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}
print(json.dumps({name: path for name, path in files.items() if path}))
"""

WORKER_PROBE = """
import json, sys
import django
from celery.app.utils import find_app
from kombu.utils.imports import symbol_by_name
app = find_app(sys.argv[1])
django.setup()  # as Celery's Django fixup does when a worker or beat starts
app.loader.import_default_modules()
symbol_by_name(sys.argv[2])
scheduled = sorted(entry["task"] for entry in app.conf.beat_schedule.values())
print(json.dumps({"tasks": sorted(app.tasks), "scheduled": scheduled}))
"""


@dataclass(frozen=True)
class Built:
    """The assembled and built image, and the files its COPY lines alone put there."""

    image: Image
    copied: dict[str, tuple[int, int]]


# Another Dockerfile to hold to these tests (an older one, a draft); the context stays the checkout.
DOCKERFILE = Path(os.environ.get("DASHBOARD_TEST_DOCKERFILE", ROOT / "Dockerfile"))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("image")
    image = Image.assemble(DOCKERFILE, context=ROOT, work=work)
    copied = image.files()
    image.build()
    return Built(image, copied)


def project_packages() -> list[str]:
    """Top-level packages pyproject.toml ships (its setuptools `include` patterns)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    names = [path.parent.name for path in ROOT.glob("*/__init__.py")]
    return sorted(name for name in names if any(fnmatch(name, pattern) for pattern in include))


def manifest_env() -> dict[str, str]:
    """The ConfigMap and Secret of deploy/, placeholders filled with random values, debug off."""
    config = one("ConfigMap", "dra-dashboard")["data"]
    secret = {
        key: re.sub(r"CHANGE-ME[\w-]*", secrets.token_urlsafe(40), value)
        for key, value in one("Secret", "dra-dashboard")["stringData"].items()
    }
    return {**config, **secret, "DASHBOARD_DEBUG": "0"}


def run_read_only(image: Image, argv: list[str], env: dict[str, str]) -> CompletedProcess[str]:
    """Run an image command, which must succeed and write only under /tmp: the manifests mount
    the root filesystem read-only."""
    before = {path: v for path, v in image.files().items() if not path.startswith("tmp/")}
    done = image.run(argv, env=env)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr[-3000:]}"
    after = {path: v for path, v in image.files().items() if not path.startswith("tmp/")}
    assert after == before, f"{argv} wrote outside /tmp: {sorted(set(after) ^ set(before))}"
    return done


def test_image_holds_every_package_pyproject_lists_byte_compiled(built: Built) -> None:
    """Each package pyproject.toml ships is in the WORKDIR, every module with its .pyc."""
    workdir = built.image.path(built.image.build_step().workdir)
    packages = project_packages()
    assert packages
    for package in packages:
        assert (workdir / package / "__init__.py").is_file(), f"{package}/ is not in the image"
        for module in (workdir / package).rglob("*.py"):
            assert Path(cache_from_source(str(module))).is_file(), f"{module} is not compiled"


def test_build_step_writes_only_the_workdir_and_keeps_no_secret(built: Built) -> None:
    """Collected static files land in the WORKDIR, nothing elsewhere (no root-owned var dir in
    /tmp); the build-time key is no ENV of the image."""
    image = built.image
    workdir = image.build_step().workdir.strip("/") + "/"
    written = set(image.files()) - set(built.copied)
    outside = sorted(path for path in written if not path.startswith(workdir))
    assert written and not outside, outside
    static_root = image.path(image.stage.env["DASHBOARD_STATIC_ROOT"])
    assert (static_root / "admin" / "css" / "base.css.gz").is_file()
    assert not any("SECRET" in key for key in image.stage.env)


def test_web_serves_the_asgi_app_from_the_image_files_alone(built: Built) -> None:
    """The web arm's ASGI application imports with production settings, and no module comes
    from outside the image's files, the venv or the standard library (never the checkout)."""
    image = built.image
    _, entrypoint = image.entrypoint()
    assert entrypoint.arms["web"][:3] == ["python", "-m", "console.serve"]
    target = entrypoint.asgi_application()
    done = run_read_only(image, ["python", "-c", WEB_PROBE, target], manifest_env())
    modules = json.loads(done.stdout.splitlines()[-1])
    roots = probe_allowed_roots(image)
    strays = sorted(
        path
        for path in modules.values()
        if path.startswith("/") and not any(path.startswith(root + "/") for root in roots)
    )
    assert not strays, strays
    top = target.split(".")[0]
    assert modules[top].startswith(str(image.rootfs) + "/")


def test_check_deploy_passes_with_the_manifests_settings(built: Built) -> None:
    """`manage check --deploy` through the entrypoint's manage arm reports no error."""
    _, entrypoint = built.image.entrypoint()
    argv = entrypoint.command("manage", "check", "--deploy")
    done = run_read_only(built.image, argv, manifest_env())
    assert "System check identified" in done.stdout + done.stderr


def test_worker_and_beat_find_their_app_and_every_scheduled_task(built: Built) -> None:
    """The Celery app the worker and beat arms name loads, with their scheduler and every task
    beat schedules."""
    _, entrypoint = built.image.entrypoint()
    app = entrypoint.option("worker", "-A")
    assert entrypoint.option("beat", "-A") == app
    scheduler = entrypoint.option("beat", "--scheduler")
    argv = ["python", "-c", WORKER_PROBE, app, scheduler]
    found = json.loads(run_read_only(built.image, argv, manifest_env()).stdout.splitlines()[-1])
    assert found["scheduled"] and set(found["scheduled"]) <= set(found["tasks"])


def test_migrate_applies_every_migration(built: Built) -> None:
    """The migrate arm migrates a fresh database (SQLite under /tmp instead of PostgreSQL)."""
    image = built.image
    _, entrypoint = image.entrypoint()
    database = image.path("/tmp/migrate.sqlite3")
    database.parent.mkdir(exist_ok=True)
    env = {**manifest_env(), "DASHBOARD_DATABASE_URL": f"sqlite:///{database}"}
    run_read_only(image, entrypoint.command("migrate"), env)
    done = run_read_only(image, entrypoint.command("manage", "showmigrations", "-p"), env)
    assert "[X]" in done.stdout and "[ ]" not in done.stdout


def test_a_missing_copy_line_breaks_the_build(tmp_path: Path) -> None:
    """Without the COPY of the web app's package the build step fails: the checkout never
    stands in for a file the image lacks."""
    dockerfile = DOCKERFILE.read_text()
    package = "console"
    line = f"\nCOPY {package} {package}\n"
    assert line in dockerfile
    (tmp_path / "Dockerfile").write_text(dockerfile.replace(line, "\n"))
    image = Image.assemble(tmp_path / "Dockerfile", context=ROOT, work=tmp_path / "work")
    with pytest.raises(ImageError, match=f"No module named '{package}'"):
        image.build()


@pytest.mark.parametrize(
    ("patterns", "path", "excluded"),
    [
        ("tests", "tests/deploy/test_image.py", True),
        ("tests", "claims/tests/x.py", False),
        ("**/__pycache__", "claims/devices/__pycache__/pages.cpython-311.pyc", True),
        ("**/__pycache__", "__pycache__/manage.cpython-311.pyc", True),
        ("*.egg-info", "dra_dashboard.egg-info/PKG-INFO", True),
        ("deploy/*.yaml", "deploy/entrypoint.sh", False),
        ("deploy/*.yaml", "deploy/prometheus/scrape-config.yaml", False),
        ("deploy\n!deploy/entrypoint.sh", "deploy/entrypoint.sh", False),
    ],
)
def test_dockerignore_matches_as_docker_does(patterns: str, path: str, excluded: bool) -> None:
    """Patterns are anchored at the context, match parent directories, and `!` re-includes."""
    assert DockerIgnore(patterns).excludes(path) is excluded
