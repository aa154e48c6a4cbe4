"""Pool status agrees with the pool pages on every pool of a 1,000-node demo cluster."""

from __future__ import annotations

from claims.choices import DeviceState
from claims.devices.pages import grid_counts, pool_grid
from claims.devices.poolstatus import LIMIT_MAX, PoolStatusFilter, pool_statuses
from inventory.models import Pool
from tests.console.demo import load_demo


def _page_numbers(pool: Pool) -> dict[str, int]:
    grid = pool_grid(pool)
    counts = grid_counts(grid)
    # Unavailable: not allocated, yet kept from a new allocation (what the grid colours
    # tainted, blocked or unhealthy).
    kept = (DeviceState.TAINTED, DeviceState.BLOCKED, DeviceState.UNHEALTHY)
    unavailable = sum(1 for cell in grid if not cell["device"].allocated and cell["state"] in kept)
    return {
        "totalDevices": counts["total"],
        "allocatedDevices": counts["allocated"],
        "unavailableDevices": unavailable,
        "availableDevices": counts["total"] - counts["allocated"] - unavailable,
    }


def test_pool_status_equals_pool_pages_on_1000_node_demo(db) -> None:
    """For every pool of a generated 1,000-node demo, the pool-status counts are the page's."""
    load_demo(nodes=1000, seed=7)
    count, statuses = pool_statuses(PoolStatusFilter(), limit=Pool.objects.count())
    assert count == Pool.objects.count() > LIMIT_MAX
    assert len(statuses) == count
    pools = {(pool.driver, pool.name): pool for pool in Pool.objects.all()}
    states_seen: set[str] = set()
    for entry in statuses:
        pool = pools[(entry["driver"], entry["poolName"])]
        assert entry["generation"] == pool.generation
        if not pool.complete:
            # The demo publishes an incomplete pool on purpose: no counts, an error instead.
            assert entry["validationError"].startswith("incomplete:")
            assert "totalDevices" not in entry
            states_seen.add("validationError")
            continue
        assert "validationError" not in entry, entry
        page = _page_numbers(pool)
        assert {key: entry[key] for key in page} == page, entry["poolName"]
        states_seen.update(key for key, value in page.items() if value)
    assert {
        "allocatedDevices",
        "unavailableDevices",
        "availableDevices",
        "validationError",
    } <= states_seen
