"""Tests of dralib.kube; helpers here load the hand-written fixtures under fixtures/."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "normalize"


def load_yaml(path: Path) -> Any:
    """Parse one YAML fixture file."""
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@dataclass(frozen=True)
class Served:
    """One input fixture: `<version>.yaml` is exactly how that version serves the object,
    `<version>-<note>.yaml` is another way a server sent it (older release, future fields)."""

    case: str
    path: Path
    version: str
    exact: bool

    @property
    def api_version(self) -> str:
        """The apiVersion the fixture file declares."""
        return str(load_yaml(self.path)["apiVersion"])


def served_inputs() -> list[Served]:
    """Every input fixture of every normalize case, in a stable order."""
    found: list[Served] = []
    for case in sorted(p for p in CASES.iterdir() if p.is_dir()):
        for path in sorted(case.glob("*.yaml")):
            if path.name == "expected.yaml":
                continue
            version, _, note = path.stem.partition("-")
            found.append(Served(case.name, path, version, exact=not note))
    return found


def expected(case: str) -> Any:
    """The hand-written internal shape a case's inputs must normalize to."""
    return load_yaml(CASES / case / "expected.yaml")


def case_names() -> list[str]:
    """Names of all normalize cases."""
    return sorted(p.name for p in CASES.iterdir() if p.is_dir())
