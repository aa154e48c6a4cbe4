"""Kubernetes' CEL semver library: ``semver()``, ``isSemver()`` and Semver members.

A semantic version value is ``["<version>"]`` (CEL ``list(string)``), without build metadata.
"""

from __future__ import annotations

from functools import lru_cache

from cel_expr_python import cel

from dralib.allocator.cel.library import SEMVER, FunctionError, Overloads, describe, overload
from dralib.allocator.semver import Semver, SemverError, parse_semver

__all__ = ["is_semver", "overloads", "semver_value", "to_semver"]


def semver_value(text: object, *, normalize: bool = False) -> list[str]:
    """The CEL value of a version string; FunctionError when invalid."""
    if text.__class__ is str:
        # Devices repeat their driver versions: parse each text once. A fresh list each time,
        # as before, so no caller shares one.
        return [_semver_text(text, normalize)]
    try:
        return [parse_semver(text, normalize=normalize).without_build()]  # type: ignore[arg-type]
    except SemverError as exc:
        raise FunctionError(f"parse semantic version: {exc}") from exc


@lru_cache(maxsize=4096)
def _semver_text(text: str, normalize: bool) -> str:
    try:
        return parse_semver(text, normalize=normalize).without_build()
    except SemverError as exc:
        raise FunctionError(f"parse semantic version: {exc}") from exc


@lru_cache(maxsize=4096)
def _semver(text: str) -> Semver:
    return parse_semver(text)


def is_semver(value: object) -> bool:
    """Whether a CEL value has the shape of a Semver (a list of one valid version string)."""
    if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)):
        return False
    try:
        _semver(value[0])
    except SemverError:
        return False  # a plain list of one string, such as ["world"]
    return True


def to_semver(value: object) -> Semver:
    """The version a Semver value holds; FunctionError for any other value."""
    if is_semver(value):
        try:
            return _semver(value[0])  # type: ignore[index]
        except SemverError:
            pass
    raise FunctionError(f"no such overload: expected a semver, got {describe(value)}")


def _from_string(text: str, normalize: bool = False) -> list[str]:
    return semver_value(text, normalize=normalize)


def _is_semver_string(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize=normalize)
    except SemverError:
        return False
    return True


def _compare(a: object, b: object) -> int:
    return to_semver(a).compare(to_semver(b))


def overloads() -> Overloads:
    """The semver library's overloads by function name."""
    s, string, integer, boolean = SEMVER, cel.Type.STRING, cel.Type.INT, cel.Type.BOOL
    return {
        "compareTo": [overload("semver_compare_to", [s, s], integer, _compare, member=True)],
        "isGreaterThan": [
            overload(
                "semver_greater", [s, s], boolean, lambda a, b: _compare(a, b) > 0, member=True
            )
        ],
        "isLessThan": [
            overload("semver_less", [s, s], boolean, lambda a, b: _compare(a, b) < 0, member=True)
        ],
        "semver": [
            overload("string_to_semver", [string], s, _from_string),
            overload("string_bool_to_semver", [string, boolean], s, _from_string),
        ],
        "isSemver": [
            overload("is_semver_string", [string], boolean, _is_semver_string),
            overload("is_semver_string_bool", [string, boolean], boolean, _is_semver_string),
        ],
        "major": [
            overload("semver_major", [s], integer, lambda v: to_semver(v).major, member=True)
        ],
        "minor": [
            overload("semver_minor", [s], integer, lambda v: to_semver(v).minor, member=True)
        ],
        "patch": [
            overload("semver_patch", [s], integer, lambda v: to_semver(v).patch, member=True)
        ],
    }
