"""Label and field selectors of list and watch queries, as predicates over stored objects.

Parsing is `dralib.kube.selectors`; this module words errors the way the API server does and
applies the requirements to an object's labels or fields. Field selectors accept any dotted path
(real servers allow only a few fields per kind, e.g. spec.nodeName on pods and ResourceSlices);
being generous here never hides a client bug because clients only send the supported ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dralib.kube import selectors
from dralib.kube.selectors import Requirement, SelectorError, matches_all

__all__ = ["Predicate", "SelectorError", "parse_field_selector", "parse_label_selector"]

Predicate = Callable[[dict[str, Any]], bool]


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def _field(obj: dict[str, Any], path: str) -> Any:
    # A missing field reads as "" so that `path=` selects objects without it, as on a real server.
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    return "" if value is None else value


def parse_label_selector(selector: str | None) -> Predicate:
    """Compile a label selector (=, ==, !=, in, notin, exists, !exists) into a predicate."""
    try:
        requirements = selectors.parse_label_selector(selector)
    except SelectorError as exc:
        message = f"unable to parse requirement {exc.term!r} in labelSelector"
        raise SelectorError(exc.term, exc.reason, message=message) from exc
    return lambda obj: matches_all(requirements, _labels(obj))


def parse_field_selector(selector: str | None) -> Predicate:
    """Compile a field selector (path=value, path==value, path!=value) into a predicate."""
    try:
        requirements = selectors.parse_field_selector(selector)
    except SelectorError as exc:
        message = f"invalid selector {exc.term!r} in fieldSelector"
        raise SelectorError(exc.term, exc.reason, message=message) from exc
    return lambda obj: all(_field_matches(requirement, obj) for requirement in requirements)


def _field_matches(requirement: Requirement, obj: dict[str, Any]) -> bool:
    return requirement.matches({requirement.key: _field(obj, requirement.key)})
