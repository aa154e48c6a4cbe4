"""Label and field selectors as the API server parses them from list and watch queries.

Field selectors accept any dotted path (real servers allow only a few fields per kind, e.g.
spec.nodeName on pods and ResourceSlices); being generous here never hides a client bug because
clients only send the supported ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_TERM = re.compile(r"^\s*([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)\s*$")


class SelectorError(ValueError):
    """A selector the server cannot parse; answered with 400 BadRequest."""


def _split_terms(selector: str) -> list[str]:
    # Commas inside "in (a,b)" do not separate terms.
    terms: list[str] = []
    depth = 0
    current = ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def _field(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class _Requirement:
    """One selector term: a label key or field path, an operator and its values."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str]
    on_labels: bool

    def __call__(self, obj: dict[str, Any]) -> bool:
        if self.on_labels:
            labels = _labels(obj)
            present = self.key in labels
            value = str(labels.get(self.key, ""))
        else:
            present = True
            value = _field(obj, self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values


def _all(requirements: list[_Requirement]) -> Predicate:
    return lambda obj: all(requirement(obj) for requirement in requirements)


def parse_label_selector(selector: str | None) -> Predicate:
    """Compile a label selector (=, ==, !=, in, notin, exists, !exists) into a predicate."""
    requirements: list[_Requirement] = []
    for term in _split_terms(selector or ""):
        eq = _EQ_TERM.match(term)
        if eq:
            key, op, value = eq.groups()
            op = "!=" if op == "!=" else "="
            requirements.append(_Requirement(key, op, frozenset([value]), True))
            continue
        match = _SET_TERM.match(term)
        if not match or (match.group(1) and match.group(3)):
            raise SelectorError(f"unable to parse requirement {term.strip()!r} in labelSelector")
        negate, key, op, values_text = match.groups()
        if op:
            values = frozenset(v.strip() for v in values_text.split(",") if v.strip())
            requirements.append(_Requirement(key, op, values, True))
        else:
            op = "!exists" if negate else "exists"
            requirements.append(_Requirement(key, op, frozenset(), True))
    return _all(requirements)


def parse_field_selector(selector: str | None) -> Predicate:
    """Compile a field selector (path=value, path==value, path!=value) into a predicate."""
    requirements: list[_Requirement] = []
    for term in _split_terms(selector or ""):
        eq = _EQ_TERM.match(term)
        if not eq:
            raise SelectorError(f"invalid selector {term.strip()!r} in fieldSelector")
        path, op, value = eq.groups()
        op = "!=" if op == "!=" else "="
        requirements.append(_Requirement(path, op, frozenset([value]), False))
    return _all(requirements)
