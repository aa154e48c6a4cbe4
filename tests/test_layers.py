"""Every import points down the layers of docs/architecture.md, and project imports sit at the top.

The layers, lowest first: the Django-free library and the base (`dashboard`), then `inventory`,
then `claims`, then the console and the demo cluster. A module may import its own layer and the
layers below it. The library imports nothing but itself, and no Django; the base imports no app.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGES = ("dralib", "dashboard", "inventory", "claims", "console", "demo")

# Longest prefix wins. The level says which layers a module may import: lower ones and its own.
LIBRARY = ("dralib",)
LEVELS = {"library": 0, "base": 0, "inventory": 1, "claims": 2, "console": 3, "demo": 3}

# Function-level imports that Django itself asks for: app registries load handlers when ready.
LOCAL_IMPORTS_ALLOWED = {"inventory/apps.py", "claims/apps.py"}


def layer_of(module: str) -> str:
    if any(module == lib or module.startswith(lib + ".") for lib in LIBRARY):
        return "library"
    top = module.split(".")[0]
    return "base" if top == "dashboard" else top


def allowed(source: str, target: str) -> bool:
    if source == target:
        return True
    if source == "library" or target == "library" and source == "base":
        return False  # the library stands alone; the base is Django glue and needs none of it
    if source == "base":
        return False
    return LEVELS[target] < LEVELS[source]


@dataclass(frozen=True)
class Import:
    path: str
    line: int
    source: str
    target: str
    local: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_imports(path: Path) -> list[Import]:
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    local_nodes = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    found: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                targets = [".".join([*base, node.module] if node.module else base)]
            elif node.module:
                targets = [node.module]
            # `from package import module` imports the module, not the package's own code.
            targets = [
                f"{targets[0]}.{alias.name}"
                if f"{targets[0]}.{alias.name}" in MODULES
                else targets[0]
                for alias in node.names
            ]
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found.append(
                    Import(
                        path=str(path.relative_to(ROOT)),
                        line=node.lineno,
                        source=source,
                        target=target,
                        local=id(node) in local_nodes,
                    )
                )
    return found


def project_modules() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


MODULES = {module_name(path) for path in project_modules()}
ALL_IMPORTS = [found for path in project_modules() for found in project_imports(path)]


def test_the_scan_sees_the_whole_project() -> None:
    """The scan reads every app and finds imports in each layer (a guard against a vacuous pass)."""
    seen = {layer_of(found.source) for found in ALL_IMPORTS}
    assert seen == {"library", "base", "inventory", "claims", "console", "demo"}
    assert len(ALL_IMPORTS) > 300


@pytest.mark.parametrize("layer", ["library", "base", "inventory", "claims", "console", "demo"])
def test_imports_point_down(layer: str) -> None:
    """No module of the layer imports a module of a higher layer (or a sibling it may not use)."""
    upward = [
        f"{found.path}:{found.line} imports {found.target} ({layer} -> {layer_of(found.target)})"
        for found in ALL_IMPORTS
        if layer_of(found.source) == layer and not allowed(layer, layer_of(found.target))
    ]
    assert upward == []


def test_project_imports_are_at_module_level() -> None:
    """Project modules are imported at the top of the module, not inside functions."""
    hidden = [
        f"{found.path}:{found.line} imports {found.target} inside a function"
        for found in ALL_IMPORTS
        if found.local and found.path not in LOCAL_IMPORTS_ALLOWED
    ]
    assert hidden == []


def test_the_rules_catch_an_upward_import(tmp_path: Path) -> None:
    """The rules themselves: claims may use inventory, inventory may not use claims, and so on."""
    assert allowed("claims", "inventory") and allowed("console", "claims")
    assert allowed("inventory", "library") and allowed("inventory", "base")
    assert not allowed("inventory", "claims")
    assert not allowed("base", "inventory") and not allowed("base", "library")
    assert not allowed("library", "base") and not allowed("library", "inventory")
    assert not allowed("console", "demo") and not allowed("demo", "console")


PROBE = """
import json, sys
import dralib.allocator, dralib.allocator.cel, dralib.kube.normalize, dralib.kube.selectors
import dralib.kube.fakeapi, dralib.kube.documents
from dralib.allocator import allocate_scenario
allocate_scenario({"node": {"metadata": {"name": "n"}}, "claims": []})
print(json.dumps(sorted(sys.modules)))
"""


def test_library_loads_no_django_or_app_models() -> None:
    """Importing and running the library in a fresh interpreter loads no Django and no app code."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    modules = json.loads(completed.stdout)
    assert "dralib.allocator.allocator" in modules and "dralib.kube.normalize" in modules
    forbidden = [
        name
        for name in modules
        if name.split(".")[0] in ("django", "dashboard", "console", "demo")
        or (name.split(".")[0] in PACKAGES and layer_of(name) != "library"
            and name not in ("claims", "inventory", "dralib.kube"))
    ]  # fmt: skip
    assert forbidden == []
