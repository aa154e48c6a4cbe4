"""Table tests for semantic version parsing and ordering."""

from __future__ import annotations

import pytest

from dralib.allocator.semver import SemverError, is_semver, parse_semver


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("1.2.3", (1, 2, 3)),
        ("0.0.0", (0, 0, 0)),
        ("10.20.30-alpha.1+build.5", (10, 20, 30)),
        ("1.0.0-0.3.7", (1, 0, 0)),
    ],
)
def test_parse(text: str, parts: tuple[int, int, int]) -> None:
    """Valid versions expose major, minor and patch and print back unchanged."""
    version = parse_semver(text)
    assert (version.major, version.minor, version.patch) == parts
    assert str(version) == text
    assert is_semver(text)


@pytest.mark.parametrize(
    "text", ["", "1", "1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "a.b.c", "1.2.3.4"]
)
def test_invalid(text: str) -> None:
    """Strict parsing rejects anything outside Semantic Versioning 2.0.0."""
    with pytest.raises(SemverError):
        parse_semver(text)
    assert not is_semver(text)


@pytest.mark.parametrize(
    ("text", "normalized"), [("v1.0", "1.0.0"), ("1", "1.0.0"), ("01.02.03", "1.2.3")]
)
def test_normalize(text: str, normalized: str) -> None:
    """The normalising variant accepts v-prefixes, short forms and leading zeros."""
    assert str(parse_semver(text, normalize=True)) == normalized
    assert is_semver(text, normalize=True)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.2.3", "1.2.3", 0),
        ("1.2.3", "1.10.0", -1),
        ("2.0.0", "1.99.99", 1),
        ("1.0.0-alpha", "1.0.0", -1),
        ("1.0.0-alpha", "1.0.0-alpha.1", -1),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
        ("1.0.0-beta.2", "1.0.0-beta.11", -1),
        ("1.0.0-rc.1", "1.0.0-beta.11", 1),
        ("1.0.0+a", "1.0.0+b", 0),
    ],
)
def test_precedence(a: str, b: str, expected: int) -> None:
    """Ordering follows the specification; build metadata is ignored."""
    va, vb = parse_semver(a), parse_semver(b)
    assert va.compare(vb) == expected
    assert (va == vb) == (expected == 0)
    assert (va < vb) == (expected < 0)
