"""Every import points down the layers of docs/architecture.md, and project imports sit at the top.

The layers, lowest first: the Django-free library (`dralib`) and the base (`dashboard`), then
`inventory`, then `claims`, then the console and the demo cluster. A module may import its own
layer and the layers below it; the library imports nothing but itself and no Django, and the base
imports no app and names none. `tests/layers.py` is the scanner; its rules are proven here on a
small planted tree before they are trusted with the real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layers import (
    LEVELS,
    Scan,
    allowed,
    base_names,
    cycles,
    dynamic,
    hidden,
    is_framework,
    layer_of,
    library_breaches,
    module_edges,
    package_edges,
    scan,
    upward,
)
from tests.paths import ROOT

PACKAGES = ("dralib", "dashboard", "inventory", "claims", "console", "demo")
IMPORTS = {"import", "dynamic"}

PROJECT = scan(ROOT, PACKAGES)


def assert_none(found: list[str]) -> None:
    assert not found, "\n" + "\n".join(found)


def test_the_scan_sees_the_whole_project() -> None:
    """The scan reads each layer, migrations and `__main__` too (a guard against a vacuous pass)."""
    project = [r for r in PROJECT.references if r.kind == "import" and layer_of(r.target) in LEVELS]
    assert {layer_of(r.source) for r in project} == set(LEVELS)
    assert len(project) > 300
    assert {"dralib.allocator.__main__", "claims.allocator.__main__"} <= set(PROJECT.modules)
    assert any(".migrations." in name for name in PROJECT.modules)


@pytest.mark.parametrize("layer", list(LEVELS))
def test_imports_point_down(layer: str) -> None:
    """No module of the layer imports (by statement or by string) a layer it may not use."""
    assert_none(upward(PROJECT.references, layer, kinds=IMPORTS))


@pytest.mark.parametrize("layer", [layer for layer in LEVELS if layer != "base"])
def test_named_modules_point_down(layer: str) -> None:
    """Module paths, model labels and migration dependencies in strings point down as imports do."""
    assert_none(upward(PROJECT.references, layer, kinds={"string"}))


def test_the_library_imports_no_framework_and_no_app() -> None:
    """No library file, nor the allocator CLI's entry, imports Django or an app, even unloaded."""
    assert_none(library_breaches(PROJECT.references))


def test_project_imports_are_at_module_level() -> None:
    """Project modules are imported at the top, but for an app's `ready()` loading its handlers."""
    assert_none(hidden(PROJECT.references))


def test_project_modules_are_imported_by_name() -> None:
    """No project module is imported from a string (importlib, `__import__`, `import_string`)."""
    assert_none(dynamic(PROJECT.references))


def test_the_base_names_no_app() -> None:
    """The base names no app, app module, task or page; only Django's composing settings do."""
    assert_none(base_names(PROJECT.references))


def test_no_module_imports_itself_through_others() -> None:
    """No cycle of module-level imports, which fails or half-initialises by import order."""
    assert_none(cycles(module_edges(PROJECT), "module"))


def test_no_two_packages_import_each_other() -> None:
    """No cycle between packages of which neither contains the other (a tangle of two areas)."""
    assert_none(cycles(package_edges(PROJECT), "package"))


def test_the_layer_table() -> None:
    """Claims may use inventory, inventory may not use claims, the base and library stand apart."""
    assert allowed("claims", "inventory") and allowed("console", "claims")
    assert allowed("inventory", "library") and allowed("inventory", "base")
    assert not allowed("inventory", "claims")
    assert not allowed("base", "inventory") and not allowed("base", "library")
    assert not allowed("library", "base") and not allowed("library", "inventory")
    assert not allowed("console", "demo") and not allowed("demo", "console")


PLANTED = {
    "dralib/allocator/taintrules.py": "import django\n",
    "dralib/kube/normalize.py": "from dralib.allocator import taintrules\n",
    "dashboard/settings.py": (
        'INSTALLED_APPS = ["django.contrib.admin", "inventory", "claims"]\n'
        'ROOT_URLCONF = "console.urls"\n'
        'CELERY_TASK_ROUTES = {"inventory.tasks.watch": {"queue": "watchers"}}\n'
    ),
    "dashboard/celery.py": 'BEAT = {"refresh": {"task": "claims.tasks.refresh"}}\n',
    "dashboard/ui.py": (
        'NAV = (("pool-list", "Pools"),)\nLOGGING = {"root": {"handlers": ["console"]}}\n'
    ),
    "inventory/models.py": "from claims.models import Claim\n",
    "inventory/tasks.py": (
        "import importlib\n\n"
        'MODELS = importlib.import_module("claims.models")\n'
        'PAGE = __import__(f"console.{NAME}")\n'
    ),
    "inventory/apps.py": "def ready():\n    import inventory.models\n",
    "inventory/sync.py": "def run():\n    import claims.models\n",
    "inventory/migrations/0002_link.py": (
        'import claims.models\n\ndependencies = [("claims", "0001_initial")]\n'
    ),
    "claims/models.py": "Claim = 1\n",
    "claims/urls.py": 'from django.urls import path\n\nurls = [path("", None, name="pool-list")]\n',
    "claims/pages.py": "from claims.devices import usage\n",
    "claims/devices/__init__.py": "from claims.devices.usage import used\n",
    "claims/devices/usage.py": "from claims import pages\n\nused = 1\n",
    "claims/devices/states.py": "from claims.whatif.budget import LIMIT\n",
    "claims/whatif/budget.py": "LIMIT = 1\n",
    "claims/whatif/run.py": "from claims.devices.states import LIMIT\n",
}


def planted(root: Path) -> Scan:
    for name, text in PLANTED.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for package in path.relative_to(root).parents:
            if package != Path("."):
                (root / package / "__init__.py").touch()
    for package in PACKAGES:
        (root / package).mkdir(exist_ok=True)
    return scan(root, PACKAGES)


def test_the_scanner_catches_planted_breaches(tmp_path: Path) -> None:
    """Each rule, run on a planted tree, reports the breach planted for it and nothing innocent."""
    found = planted(tmp_path)
    refs = found.references
    assert upward(refs, "inventory", kinds=IMPORTS) == [
        "inventory/migrations/0002_link.py:1 import claims.models (inventory -> claims)",
        "inventory/models.py:1 import claims.models (inventory -> claims)",
        "inventory/sync.py:2 import claims.models (inventory -> claims)",
        "inventory/tasks.py:3 dynamic claims.models (inventory -> claims)",
        "inventory/tasks.py:4 dynamic console (inventory -> console)",
    ]
    assert upward(refs, "inventory", kinds={"string"}) == [
        "inventory/migrations/0002_link.py:3 string claims.migrations.0001_initial "
        "(inventory -> claims)"
    ]
    assert library_breaches(refs) == [
        "dralib/allocator/taintrules.py:1 dralib.allocator.taintrules imports django "
        "(must load no Django and no app)",
        "dralib/kube/normalize.py:1 dralib.kube.normalize imports dralib.allocator.taintrules "
        "(only dralib.allocator.cel, dralib.allocator.quantity, dralib.allocator.semver)",
    ]
    assert hidden(refs) == ["inventory/sync.py:2 imports claims.models inside run()"]
    assert dynamic(refs) == [
        "inventory/tasks.py:3 imports claims.models by string (inventory -> claims)",
        "inventory/tasks.py:4 imports console by string (inventory -> console)",
    ]
    assert base_names(refs) == [
        "dashboard/celery.py:1 names 'claims.tasks.refresh' in BEAT",
        "dashboard/settings.py:3 names 'inventory.tasks.watch' in CELERY_TASK_ROUTES",
        "dashboard/ui.py:1 names 'pool-list' in NAV",
    ]
    assert cycles(module_edges(found), "module") == [
        "module cycle claims.devices.usage <-> claims.pages: "
        "claims/devices/usage.py:1 claims.devices.usage -> claims.pages; "
        "claims/pages.py:1 claims.pages -> claims.devices.usage"
    ]
    assert cycles(package_edges(found), "package") == [
        "package cycle claims.devices <-> claims.whatif: "
        "claims/devices/states.py:1 claims.devices -> claims.whatif; "
        "claims/whatif/run.py:1 claims.whatif -> claims.devices"
    ]


# Imports every library module named on the command line, then runs the allocator once.
PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from dralib.allocator import allocate_scenario
allocate_scenario({"node": {"metadata": {"name": "n"}}, "claims": []})
print(json.dumps(sorted(sys.modules)))
"""
# A fresh interpreter that sees the project and the virtualenv's packages, and no settings module.
FRESH = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
LIBRARY = sorted(name for name in PROJECT.modules if layer_of(name) == "library")


def foreign(modules: list[str], *, allowed_above: set[str]) -> list[str]:
    return [
        name
        for name in modules
        if is_framework(name)
        or (
            name.split(".")[0] in PACKAGES
            and layer_of(name) != "library"
            and name not in allowed_above
        )
    ]


def test_library_loads_no_django_or_app_modules() -> None:
    """Importing every library module and running the allocator loads no Django and no app code."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *LIBRARY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=FRESH,
    )
    modules = json.loads(completed.stdout)
    assert set(LIBRARY) <= set(modules)
    assert foreign(modules, allowed_above=set()) == []


def test_the_allocator_cli_loads_no_django() -> None:
    """`python -m claims.allocator` answers a tiny scenario importing no Django and no app code."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "claims.allocator"],
        input=json.dumps({"node": {"metadata": {"name": "n"}}, "claims": []}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=FRESH,
    )
    assert json.loads(completed.stdout) == {"results": [], "error": ""}
    # `-X importtime` writes "import time: self | cumulative | name" for every module imported.
    modules = [
        line.rpartition("|")[2].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "dralib.allocator.__main__" in modules and "dralib.allocator.allocator" in modules
    assert foreign(modules, allowed_above={"claims", "claims.allocator"}) == []
