"""The scanner behind tests/test_layers.py: each module's imports and the strings naming modules.

`scan(root, packages)` reads any tree, so the tests run the same rules on a small planted tree to
prove that each rule catches what it is meant to catch.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

APPS = ("inventory", "claims", "console", "demo")
# A module may import its own layer and lower ones; the library and the base are both level 0 and
# may not import each other (`allowed`).
LEVELS = {"library": 0, "base": 0, "inventory": 1, "claims": 2, "console": 3, "demo": 3}
# Modules that must run without Django: the library, and the allocator CLI's entry point.
DJANGO_FREE = ("dralib", "claims.allocator")
FRAMEWORKS = ("django", "rest_framework", "channels", "celery", "kombu", "uvicorn", "whitenoise")
FRAMEWORK_PREFIXES = ("django_", "drf_")
# Inside the library the allocator is upstream's algorithm over v1-shaped objects and knows nothing
# of Kubernetes transport; the kube side validates like the API server, which compiles CEL and
# parses quantities with the allocator's code, so it may use those parts, never the engine. The
# shared parts stay leaves: they import no engine either.
SHARED = ("dralib.allocator.cel", "dralib.allocator.quantity", "dralib.allocator.semver")
# Django's settings are the one place where a project composes its apps: these settings name them.
COMPOSITION = {
    "INSTALLED_APPS",
    "MIDDLEWARE",
    "ROOT_URLCONF",
    "ASGI_APPLICATION",
    "WSGI_APPLICATION",
}
DYNAMIC = {"import_module", "__import__", "import_string", "run_module"}
APP_LABEL_CALLS = {"get_app_config", "is_installed", "get_model", "get_models"}
DOTTED = re.compile(r"[A-Za-z_]\w*(\.\w+)+(:\w+)?")


@dataclass(frozen=True)
class Reference:
    """One module naming another: an import, an import by string, or a string naming a module."""

    path: str
    line: int
    source: str
    target: str
    kind: str  # "import", "dynamic", "string", or "name" (a string in the base that names an app)
    function: str | None = None  # the enclosing function; None at module level
    typing: bool = False  # under `if TYPE_CHECKING:`, so never run
    setting: str | None = None  # the module-level name the value is assigned to

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Scan:
    """What `scan` found in one tree."""

    modules: dict[str, Path]
    packages: frozenset[str]
    references: list[Reference]


def under(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def layer_of(module: str) -> str:
    if under(module, ["dralib"]):
        return "library"
    top = module.split(".")[0]
    return "base" if top == "dashboard" else top


def allowed(source: str, target: str) -> bool:
    if source == target:
        return True
    if "base" in (source, target) and "library" in (source, target):
        return False  # the library stands alone; the base is Django glue and needs none of it
    return LEVELS[target] < LEVELS[source] and source != "library"


def is_framework(module: str) -> bool:
    top = module.split(".")[0]
    return top in FRAMEWORKS or top.startswith(FRAMEWORK_PREFIXES)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def longest_module(dotted: str, modules: dict[str, Path]) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def scan(root: Path, packages: Sequence[str]) -> Scan:
    """Read every .py file of the packages (migrations and `__main__` included)."""
    files = sorted(path for package in packages for path in (root / package).rglob("*.py"))
    modules = {module_name(root, path): path for path in files}
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path in files}
    url_names = {
        keyword.value.value
        for path, tree in trees.items()
        if module_name(root, path).split(".")[0] in APPS
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and call_name(node) in ("path", "re_path")
        for keyword in node.keywords
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant)
    }
    found = [
        reference
        for path, tree in trees.items()
        for reference in read_module(
            path, root=root, tree=tree, modules=modules, packages=packages, url_names=url_names
        )
    ]
    found.sort(key=lambda reference: (reference.path, reference.line))
    is_package = frozenset(name for name, path in modules.items() if path.name == "__init__.py")
    return Scan(modules=modules, packages=is_package, references=found)


def call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def read_module(
    path: Path,
    *,
    root: Path,
    tree: ast.Module,
    modules: dict[str, Path],
    packages: Sequence[str],
    url_names: set[str],
) -> list[Reference]:
    source = module_name(root, path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    migration = "migrations" in path.parts
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[Reference] = []

    def add(node: ast.AST, target: str, *, kind: str) -> None:
        function, typing, setting = None, False, None
        walker = node
        while walker in parents:
            walker, child = parents[walker], walker
            if function is None and isinstance(walker, ast.FunctionDef | ast.AsyncFunctionDef):
                function = walker.name
            if isinstance(walker, ast.If) and ast.unparse(walker.test).endswith("TYPE_CHECKING"):
                typing = typing or child in walker.body
            if isinstance(walker, ast.Module) and isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                setting = next((t.id for t in targets if isinstance(t, ast.Name)), None)
            if isinstance(walker, ast.Module) and isinstance(child, ast.AugAssign):
                setting = getattr(child.target, "id", None)
        line = getattr(node, "lineno", 0)
        relative = str(path.relative_to(root))
        found.append(Reference(relative, line, source, target, kind, function, typing, setting))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, kind="import")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, node.module] if node.module else kept)
            for alias in node.names:
                # `from package import module` imports the module, not the package's own code.
                add(
                    node,
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base,
                    kind="import",
                )
        elif isinstance(node, ast.Call) and call_name(node) in DYNAMIC and node.args:
            name = node.args[0]
            if isinstance(name, ast.JoinedStr) and name.values:
                name = name.values[0]  # f"claims.{part}": the constant head names the package
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                anchor = next((k.value for k in node.keywords if k.arg == "package"), None)
                target = name.value.rstrip(".")
                if target.startswith(".") and isinstance(anchor, ast.Constant):
                    target = importlib.util.resolve_name(target, str(anchor.value))
                add(node, longest_module(target, modules) or target, kind="dynamic")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            parent = parents.get(node)
            if isinstance(parent, ast.Expr) or (
                isinstance(parent, ast.Call) and call_name(parent) in DYNAMIC
            ):
                continue  # a docstring, or the name an import by string already counted
            target = string_target(
                node, parent=parent, modules=modules, packages=packages, migration=migration
            )
            if target:
                add(node, target, kind="string")
            if layer_of(source) == "base" and names_an_app(node.value, parent, url_names=url_names):
                add(node, node.value, kind="name")
    return found


def string_target(
    node: ast.Constant,
    *,
    parent: ast.AST | None,
    modules: dict[str, Path],
    packages: Sequence[str],
    migration: bool,
) -> str | None:
    """The module a string names: a dotted path, an `app.Model` label, a migration dependency."""
    value = node.value
    if (
        migration
        and isinstance(parent, ast.Tuple)
        and len(parent.elts) == 2
        and parent.elts[0] is node
        and value in packages
        and isinstance(parent.elts[1], ast.Constant)
    ):
        return f"{value}.migrations.{parent.elts[1].value}"
    if not DOTTED.fullmatch(value) or value.split(".")[0] not in packages:
        return None
    dotted = value.partition(":")[0]
    target = longest_module(dotted, modules)
    if target and "." in target:
        return target
    parts = dotted.split(".")
    if len(parts) == 2 and (parts[1][:1].isupper() or migration):
        return f"{parts[0]}.models"  # a model label; migrations write them in lower case
    return None


def names_an_app(value: str, parent: ast.AST | None, *, url_names: set[str]) -> bool:
    """Whether a string in the base names an app, one of its modules or one of its pages."""
    if value.startswith(tuple(f"{app}{sep}" for app in APPS for sep in ".:")):
        return True  # a module path, an object path ("module:attr") or a namespaced URL name
    if value in url_names:
        return True  # a page an app declares, like the sidebar's entries
    if value not in APPS:
        return False
    if isinstance(parent, ast.Call):
        return call_name(parent) in APP_LABEL_CALLS
    if isinstance(parent, ast.List | ast.Tuple | ast.Set):
        texts = [
            e.value for e in parent.elts if isinstance(e, ast.Constant) and type(e.value) is str
        ]
        # A list of apps (two app names, or one among module paths), not a word like "console".
        return sum(text in APPS for text in texts) > 1 or any("." in text for text in texts)
    return False


def upward(references: Iterable[Reference], layer: str, *, kinds: set[str]) -> list[str]:
    """References of these kinds from the layer to a layer it may not use."""
    return [
        f"{r.at} {r.kind} {r.target} ({layer} -> {layer_of(r.target)})"
        for r in references
        if r.kind in kinds
        and layer_of(r.source) == layer
        and layer_of(r.target) in LEVELS
        and not allowed(layer, layer_of(r.target))
    ]


def library_breaches(references: Iterable[Reference]) -> list[str]:
    """Imports (any depth, any file) of a framework, an app or the engine by Django-free code."""
    found = []
    for r in references:
        if r.kind not in ("import", "dynamic") or not under(r.source, DJANGO_FREE):
            continue
        project = layer_of(r.target) in LEVELS
        if is_framework(r.target) or (project and not under(r.target, ["dralib"])):
            found.append(f"{r.at} {r.source} imports {r.target} (must load no Django and no app)")
        elif under(r.source, ["dralib.kube", *SHARED]) and under(r.target, ["dralib.allocator"]):
            if not under(r.target, SHARED):
                found.append(f"{r.at} {r.source} imports {r.target} (only {', '.join(SHARED)})")
        elif under(r.source, ["dralib.allocator"]) and under(r.target, ["dralib.kube"]):
            found.append(f"{r.at} {r.source} imports {r.target} (the allocator knows no kube)")
    return found


def hidden(references: Iterable[Reference]) -> list[str]:
    """Project imports inside functions, but for an app's `ready()` importing its own modules."""
    return [
        f"{r.at} imports {r.target} inside {r.function}()"
        for r in references
        if r.kind == "import"
        and r.function is not None
        and layer_of(r.target) in LEVELS
        and not (
            r.path.endswith("apps.py")
            and r.function == "ready"
            and r.target.split(".")[0] == r.source.split(".")[0]
        )
    ]


def dynamic(references: Iterable[Reference]) -> list[str]:
    """Project modules imported by a string, which the other rules would not see."""
    return [
        f"{r.at} imports {r.target} by string ({layer_of(r.source)} -> {layer_of(r.target)})"
        for r in references
        if r.kind == "dynamic" and layer_of(r.target) in LEVELS
    ]


def base_names(references: Iterable[Reference]) -> list[str]:
    """Strings in the base that name an app, outside the settings that compose the project."""
    found = [
        f"{r.at} names {r.target!r}" + (f" in {r.setting}" if r.setting else "")
        for r in references
        if r.kind == "name" and not (r.source == "dashboard.settings" and r.setting in COMPOSITION)
    ]
    return list(dict.fromkeys(found))  # a name twice on one line is one finding


def module_edges(found: Scan) -> dict[tuple[str, str], list[Reference]]:
    """Module-level imports between two project modules (a `TYPE_CHECKING` import never runs)."""
    edges: dict[tuple[str, str], list[Reference]] = defaultdict(list)
    for r in found.references:
        target = longest_module(r.target, found.modules)
        if (
            r.kind == "import"
            and r.function is None
            and not r.typing
            and target not in (None, r.source)
        ):
            edges[r.source, target].append(r)
    return edges


def package_edges(found: Scan) -> dict[tuple[str, str], list[Reference]]:
    """Module edges lifted to packages neither of which contains the other.

    A module's package is its parent (a package's `__init__` is in the package itself), so an
    `__init__` re-exporting its submodules, or a submodule using its parent's models, is no edge.
    """

    def package_of(module: str) -> str:
        return module if module in found.packages else module.rpartition(".")[0]

    edges: dict[tuple[str, str], list[Reference]] = defaultdict(list)
    for (source, target), refs in module_edges(found).items():
        a, b = package_of(source), package_of(target)
        if not under(a, [b]) and not under(b, [a]):
            edges[a, b].extend(refs)
    return edges


def cycles(edges: dict[tuple[str, str], list[Reference]], what: str) -> list[str]:
    """One line per strongly connected component of the graph, with the edges that close it."""
    graph: dict[str, list[str]] = defaultdict(list)
    for source, target in edges:
        graph[source].append(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [
        f"{what} cycle {' <-> '.join(component)}: "
        + "; ".join(
            f"{refs[0].at} {source} -> {target}"
            for (source, target), refs in sorted(edges.items())
            if source in component and target in component
        )
        for component in components
    ]
