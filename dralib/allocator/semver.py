"""Semantic versions as DRA version attributes and CEL's ``semver()`` use them.

Parsing is strict Semantic Versioning 2.0.0 (as ``github.com/blang/semver/v4`` ``Parse``, which
Kubernetes uses): ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, numeric parts without leading zeros.
``parse_semver(text, normalize=True)`` mirrors the Kubernetes CEL library's normalising variant:
a leading ``v`` is dropped, missing minor/patch parts become ``0`` and leading zeros are removed.
Ordering follows the specification (pre-releases sort before the release, build metadata is
ignored), so equal versions compare equal regardless of build metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Final

__all__ = ["Semver", "SemverError", "is_semver", "parse_semver"]

_NUMERIC: Final = re.compile(r"0|[1-9][0-9]*")
_IDENTIFIER: Final = re.compile(r"[0-9A-Za-z-]+")


class SemverError(ValueError):
    """A string that is not a valid semantic version."""


@total_ordering
@dataclass(frozen=True, eq=False)
class Semver:
    """An immutable semantic version; equality and order ignore build metadata."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=())

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by Semantic Versioning precedence."""
        if self._key() != other._key():
            return -1 if self._key() < other._key() else 1
        return _compare_prerelease(self.prerelease, other.prerelease)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) == 0

    def __lt__(self, other: Semver) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash((self._key(), self.prerelease))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def without_build(self) -> str:
        """The version text without build metadata (what equality looks at)."""
        return str(Semver(self.major, self.minor, self.patch, self.prerelease))


def _compare_prerelease(left: tuple[str, ...], right: tuple[str, ...]) -> int:
    if left == right:
        return 0
    # A version without pre-release has higher precedence than one with.
    if not left:
        return 1
    if not right:
        return -1
    for a, b in zip(left, right, strict=False):
        if a == b:
            continue
        a_num, b_num = a.isdigit(), b.isdigit()
        if a_num and b_num:
            return -1 if int(a) < int(b) else 1
        if a_num != b_num:
            return -1 if a_num else 1
        return -1 if a < b else 1
    return -1 if len(left) < len(right) else 1


def _normalize(text: str) -> str:
    text = text.removeprefix("v")
    cut = len(text)
    for sep in "-+":
        index = text.find(sep)
        if index != -1:
            cut = min(cut, index)
    core, rest = text[:cut], text[cut:]
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [part.lstrip("0") or "0" if part.isdigit() else part for part in parts]
    return ".".join(parts) + rest


_PARSED_LIMIT = 16_384
_PARSED: dict[tuple[str, bool], Semver] = {}


def parse_semver(text: str, *, normalize: bool = False) -> Semver:
    """Parse a semantic version; raise SemverError when invalid."""
    if not isinstance(text, str):
        raise SemverError(f"version must be a string, not {type(text).__name__}")
    # Versions are immutable and devices repeat the same few strings: parse each text once.
    key = (text, normalize)
    cached = _PARSED.get(key)
    if cached is None:
        cached = _parse_semver(text, normalize=normalize)
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[key] = cached
    return cached


def _parse_semver(text: str, *, normalize: bool) -> Semver:
    original = text
    if normalize:
        text = _normalize(text)
    core, _, build_text = text.partition("+")
    core, dash, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise SemverError(f"{original!r}: no major, minor and patch version")
    numbers = []
    for name, part in zip(("major", "minor", "patch"), parts, strict=True):
        if not _NUMERIC.fullmatch(part):
            raise SemverError(f"{original!r}: invalid {name} number {part!r}")
        numbers.append(int(part))
    prerelease: tuple[str, ...] = ()
    if dash:
        prerelease = tuple(pre_text.split("."))
        for ident in prerelease:
            if not _IDENTIFIER.fullmatch(ident):
                raise SemverError(f"{original!r}: invalid pre-release identifier {ident!r}")
            if ident.isdigit() and not _NUMERIC.fullmatch(ident):
                raise SemverError(f"{original!r}: pre-release number {ident!r} has leading zeros")
    build: tuple[str, ...] = ()
    if "+" in text:
        build = tuple(build_text.split("."))
        for ident in build:
            if not _IDENTIFIER.fullmatch(ident):
                raise SemverError(f"{original!r}: invalid build metadata {ident!r}")
    return Semver(numbers[0], numbers[1], numbers[2], prerelease, build)


def is_semver(text: object, *, normalize: bool = False) -> bool:
    """Whether ``text`` is a string that parses as a semantic version."""
    if not isinstance(text, str):
        return False
    try:
        parse_semver(text, normalize=normalize)
    except SemverError:
        return False
    return True
