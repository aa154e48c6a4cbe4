"""Shared fixtures: fixed personas for permission tests and API clients.

The session refuses to start when a system package the suite needs is missing, so a test never
fails half-way for want of what `bin/system-deps` installs.

Every test that reaches the database or Redis is marked `services` here: `bin/test` runs those
again on PostgreSQL and Redis, and the rest only once. With `--min-ran N`, a run in which fewer
than N tests ran fails, so a selection that went wrong cannot pass unnoticed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from claims.events import SWEEPS
from dashboard import scope
from dashboard.kept import Kept
from inventory.clusters import forget as forget_clusters
from inventory.clusters import in_cluster
from tests.console.demo import load_demo

SYSTEM_PACKAGES = {
    "redis-server": lambda: shutil.which("redis-server") is not None,
    "postgresql": lambda: any(Path("/usr/lib/postgresql").glob("*/bin/initdb")),
    "chromium": lambda: Path("/usr/bin/chromium").exists(),
    "chromium-driver": lambda: Path("/usr/bin/chromedriver").exists(),
    "prometheus": lambda: shutil.which("promtool") is not None,
}


# pytest-django's fixtures that open the test database; a test requesting one, directly or
# through another fixture, or marked `django_db`, uses the database.
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
        "django_db_setup",
        "_django_db_helper",
    }
)


# Fixtures that reach Django's cache, Redis when DASHBOARD_REDIS_URL is set. A test that reaches
# Redis otherwise is marked `redis`.
REDIS_FIXTURES = frozenset({"fresh_caches"})


def uses_services(item: pytest.Item) -> bool:
    """Whether the test reaches the database (any backend) or Redis when one is configured."""
    if item.get_closest_marker("django_db") or item.get_closest_marker("redis"):
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    return not fixtures.isdisjoint(DATABASE_FIXTURES | REDIS_FIXTURES)


@pytest.hookimpl(tryfirst=True)
@pytest.fixture(autouse=True)
def _nothing_kept_from_earlier_tests() -> None:
    """Each test starts with no kept membership, counts or leaks, as a new process would: what
    a test asks (query counts above all) must not depend on which tests ran before it in the
    worker."""
    Kept.forget_every()
    # Nor a TTL sweep of the events: a new process's first Event batch sweeps.
    SWEEPS.last = None


@pytest.fixture(autouse=True)
def _in_default_cluster(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test using the database works in the default cluster's scope, as a request does."""
    forget_clusters()
    uses_db = request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames
        for name in ("db", "transactional_db", "live_server", "django_db_reset_sequences")
    )
    if not uses_db:
        yield
        return
    request.getfixturevalue("_django_db_helper")
    with in_cluster():
        # Looked up now, not inside a test's count of its queries.
        scope.current()
        yield
    forget_clusters()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: the marks must be there before `-m` deselects by them.
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        if uses_services(item):
            item.add_marker(pytest.mark.services)
        if xdist and item.get_closest_marker("browser"):
            # Under pytest-xdist's --dist loadgroup (bin/test) one worker runs them all, with one
            # server and one Chromium.
            item.add_marker(pytest.mark.xdist_group("browser"))


class RanCounter:
    """Counts the tests whose body ran."""

    def __init__(self) -> None:
        self.ran = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.ran += 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--min-ran",
        type=int,
        default=0,
        metavar="N",
        help="fail the run when fewer than N tests ran (bin/test's second run)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Under pytest-xdist only the controller counts: it sees every worker's reports.
    if config.getoption("min_ran") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(RanCounter(), "dashboard-ran-counter")
    if os.environ.pop("DASHBOARD_REDIS_URL_FILE", ""):
        # bin/test gives each worker its Redis database in a file, which the settings have read.
        # Processes the tests start get the URL plainly, so that they can be given another one.
        os.environ["DASHBOARD_REDIS_URL"] = settings.REDIS_URL


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    counter = session.config.pluginmanager.get_plugin("dashboard-ran-counter")
    if counter is None or session.exitstatus != pytest.ExitCode.OK:
        return
    minimum = session.config.getoption("min_ran")
    if counter.ran < minimum:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(
                f"only {counter.ran} tests ran, fewer than --min-ran {minimum}: "
                "the selection of tests is wrong",
                red=True,
                bold=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [name for name, present in SYSTEM_PACKAGES.items() if not present()]
    if missing:
        raise pytest.UsageError(
            f"system packages missing: {', '.join(missing)}; run bin/system-deps first "
            "(bin/test does)"
        )


@pytest.fixture
def admin_user(db) -> User:
    """A superuser: sees everything."""
    return User.objects.create_superuser("admin", "admin@example.com", "admin-password")


@pytest.fixture
def viewer_user(db) -> User:
    """A signed-in member of the read-only viewer group."""
    user = User.objects.create_user("viewer", "viewer@example.com", "viewer-password")
    group, _ = Group.objects.get_or_create(name="viewer")
    user.groups.add(group)
    return user


@pytest.fixture
def stranger(db) -> None:
    """An anonymous visitor."""
    return None


@pytest.fixture
def api(viewer_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer_user)
    return client


@pytest.fixture
def anon_api(db) -> APIClient:
    return APIClient()


@pytest.fixture
def demo(db) -> dict[str, list[dict[str, Any]]]:
    """A 10-node demo cluster (seed 1) in the database."""
    return load_demo(nodes=10, seed=1)


@pytest.fixture
def viewer_client(viewer_user) -> Client:
    """A browser session signed in as the viewer persona."""
    client = Client()
    client.force_login(viewer_user)
    return client
