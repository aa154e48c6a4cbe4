"""Pool counts kept across restarts: a new process at the same table versions takes them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from claims.devices import availability, counts
from claims.devices.availability import class_availability
from claims.devices.counts import pool_device_counts, unavailable_unhealthy, warm_counts
from claims.models import KeptMembership
from inventory.sync import upsert_events
from tests.claims.devices.kept import forget_kept, fresh  # noqa: F401 (fresh: autouse)
from tests.console.demo import load_demo


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = counts._compute_counts

    def counting(**kwargs: Any) -> Any:
        calls.append(kwargs.get("pools"))
        return real(**kwargs)

    monkeypatch.setattr(counts, "_compute_counts", counting)
    return calls


@pytest.mark.django_db(transaction=True)
def test_a_new_process_takes_the_stored_counts_until_a_table_moves(monkeypatch) -> None:
    """The warm-up stores the counts; a new process at the same versions counts nothing and
    has the same figures; after a claim changes it counts again, as from scratch."""
    objects = load_demo(nodes=5, seed=1)
    first = pool_device_counts()
    assert not KeptMembership.objects.filter(name="pool-counts").exists()  # pages write nothing
    forget_kept()
    warm_counts()
    assert KeptMembership.objects.filter(name="pool-counts").exists()
    unhealthy = unavailable_unhealthy()
    calls = _counted(monkeypatch)
    forget_kept()
    assert pool_device_counts() == first
    assert unavailable_unhealthy() == unhealthy
    assert calls == []
    claim = copy.deepcopy(next(c for c in objects["ResourceClaim"] if c.get("status")))
    claim["metadata"]["resourceVersion"] = "99999999"
    claim["status"] = {}
    upsert_events("ResourceClaim", [(claim, None)], publish=False)
    forget_kept()
    after = pool_device_counts()
    assert calls == [None]
    monkeypatch.undo()
    forget_kept()
    KeptMembership.objects.filter(name="pool-counts").delete()
    assert after == pool_device_counts()


@pytest.mark.django_db(transaction=True)
def test_a_warm_up_from_stored_counts_checks_the_counters_for_the_first_page(
    monkeypatch,
) -> None:
    """Counts taken as stored skip the counters check; the warm-up does it, so the first
    overview's availability does not."""
    load_demo(nodes=5, seed=1)
    warm_counts()  # stores
    forget_kept()
    monkeypatch.setattr(availability, "_overdrawn", None)  # a new process
    checks: list[int] = []
    real = availability._overdrawn_now

    def checking(index: Any, held: Any) -> Any:
        checks.append(len(held))
        return real(index, held)

    monkeypatch.setattr(availability, "_overdrawn_now", checking)
    warm_counts()  # takes the stored counts
    assert len(checks) == 1
    assert class_availability() and len(checks) == 1
