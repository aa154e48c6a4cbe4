"""Template helpers every page uses."""

from __future__ import annotations

from dashboard.templatetags.ui import grouped


def test_numbers_are_grouped() -> None:
    """Counts are shown with thousands separators."""
    assert grouped(20424) == "20,424"
    assert grouped("7") == "7"
    assert grouped(None) == ""
