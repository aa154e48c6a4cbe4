"""Label and field selectors in kubectl's ``-l`` / ``--field-selector`` syntax, parsed once.

Both the fake API server (list and watch queries) and the what-if options (``nodeSelector``) read
selectors; they share this parser and predicate and only differ in how they word an error. Keys
and values follow the API server's rules (qualified label names, label values of at most 63
characters), so a selector accepted here is one a real cluster accepts too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FIELD_OPERATORS",
    "LABEL_OPERATORS",
    "Requirement",
    "SelectorError",
    "matches_all",
    "parse_field_selector",
    "parse_label_selector",
    "split_terms",
]

LABEL_OPERATORS = ("=", "!=", "in", "notin", "exists", "!")
FIELD_OPERATORS = ("=", "!=")

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")
_FIELD_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_MAX_NAME = 63
_MAX_PREFIX = 253
_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s*\(([^()]*)\)$")
_EQ_TERM = re.compile(r"^([^=!]*)(==|!=|=)(.*)$")


class SelectorError(ValueError):
    """One term of a selector that cannot be parsed: the term as written and why.

    Callers word the error for their audience (an API status, a what-if field) from ``term`` and
    ``reason``; ``message`` replaces the default ``'term': reason`` text.
    """

    def __init__(self, term: str, reason: str, *, message: str | None = None) -> None:
        super().__init__(message or f"{term!r}: {reason}")
        self.term = term
        self.reason = reason


@dataclass(frozen=True)
class Requirement:
    """One selector term: a label key (or field path), an operator and its values.

    Operators are ``=``, ``!=``, ``in``, ``notin``, ``exists`` and ``!`` (does not exist); ``==``
    is read as ``=``. A missing key never equals anything and always differs from everything,
    as in Kubernetes.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        """Whether a label map (or a one-entry map holding a field's value) satisfies the term."""
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        value = _text(labels[self.key]) if present else None
        if self.operator in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values


def matches_all(requirements: Iterable[Requirement], labels: Mapping[str, Any]) -> bool:
    """Whether every requirement holds; no requirements select everything."""
    return all(requirement.matches(labels) for requirement in requirements)


def split_terms(selector: str) -> list[str]:
    """The stripped, non-empty terms of a selector; commas inside ``in (a,b)`` do not split."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term.strip() for term in terms if term.strip()]


def parse_label_selector(selector: str | None) -> list[Requirement]:
    """Parse ``k=v,k2!=v,k3,!k4,k5 in (a,b),k6 notin (c)``; a bad term raises SelectorError."""
    return [_label_term(term) for term in split_terms(selector or "")]


def parse_field_selector(selector: str | None) -> list[Requirement]:
    """Parse ``path=value,path==value,path!=value``; a bad term raises SelectorError."""
    requirements: list[Requirement] = []
    for term in split_terms(selector or ""):
        match = _EQ_TERM.match(term)
        if not match:
            raise SelectorError(term, "expected path=value or path!=value")
        path, operator, value = (part.strip() for part in match.groups())
        if not _FIELD_PATH.match(path):
            raise SelectorError(term, f"{path!r} is not a field path")
        requirements.append(Requirement(path, "!=" if operator == "!=" else "=", (value,)))
    return requirements


def _label_term(term: str) -> Requirement:
    values: tuple[str, ...] = ()
    set_match = _SET_TERM.match(term)
    eq_match = _EQ_TERM.match(term)
    if set_match:
        key, operator, raw_values = set_match.groups()
        values = tuple(v.strip() for v in raw_values.split(",") if v.strip())
    elif eq_match:
        key, operator, value = (part.strip() for part in eq_match.groups())
        operator = "!=" if operator == "!=" else "="
        values = (value,)
    elif term.startswith("!"):
        key, operator = term[1:].strip(), "!"
    else:
        key, operator = term, "exists"
    if not _is_label_key(key):
        raise SelectorError(term, f"{key!r} is not a label key")
    for value in values:
        if len(value) > _MAX_NAME or not _LABEL_VALUE.match(value):
            raise SelectorError(term, f"{value!r} is not a label value")
    return Requirement(key, operator, values)


def _is_label_key(key: str) -> bool:
    if not _LABEL_KEY.match(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(name) <= _MAX_NAME and len(prefix) <= _MAX_PREFIX


def _text(value: Any) -> str:
    # Field values compare as the API server prints them: booleans as true/false.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
