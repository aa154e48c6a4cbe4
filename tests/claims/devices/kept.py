"""What the kept counts and leaks tests share: every kept computation forgotten around a test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from claims.devices.availability import forget_units
from claims.devices.classes import forget_membership
from claims.devices.counts import forget_counts
from claims.leaks import forget_leaks


def forget_kept() -> None:
    """Forget the class membership, units, counts and leaks kept in the process."""
    forget_membership()
    forget_units()
    forget_counts()
    forget_leaks()


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """Each test starts and ends with nothing kept."""
    forget_kept()
    yield
    forget_kept()
