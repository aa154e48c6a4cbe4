"""The README documents every DASHBOARD_* variable that the code, scripts or deployment read."""

from __future__ import annotations

import re

from tests.paths import ROOT

VARIABLE = re.compile(r"\bDASHBOARD_[A-Z0-9_]*[A-Z0-9]\b")
SOURCES = ("dashboard", "inventory", "claims", "console", "demo", "bin", "deploy")
FILES = ("docker-compose.yml", "Dockerfile", ".env.example")


def variables_read() -> dict[str, str]:
    found: dict[str, str] = {}
    paths = [p for folder in SOURCES for p in (ROOT / folder).rglob("*") if p.is_file()]
    paths += [ROOT / name for name in FILES]
    for path in paths:
        if path.suffix in (".pyc", ".png") or "migrations" in path.parts:
            continue
        for name in VARIABLE.findall(path.read_text(errors="replace")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    # Settings are read through env helpers with the prefix added: env_int("LIST_PAGE_SIZE", ...).
    settings = (ROOT / "dashboard" / "settings.py").read_text()
    for name in re.findall(r'env_(?:str|bool|int|list|queue_name)\("([A-Z0-9_]+)"', settings):
        found.setdefault(f"DASHBOARD_{name}", "dashboard/settings.py")
    return found


def test_every_variable_is_in_the_readme() -> None:
    """Each DASHBOARD_* variable read anywhere appears in README.md's settings tables."""
    readme = (ROOT / "README.md").read_text()
    documented = set(VARIABLE.findall(readme))
    found = variables_read()
    assert len(found) > 20  # the scan really read the project
    missing = sorted(f"{name} (read in {where})" for name, where in found.items()
                     if name not in documented)  # fmt: skip
    assert missing == []
