"""Shared counters of partitionable devices (upstream checkAvailableCounters and friends).

A pool's counter sets say how much of each counter exists; devices consume counters. What is
available is computed once per pool from the devices already allocated and cached on the
allocator, keyed by pool name as upstream does. Counters consumed by devices being allocated in
the current attempt are tracked separately so that backtracking can give them back.
"""

from __future__ import annotations

from dralib.allocator.pools import Pool
from dralib.allocator.quantity import Quantity
from dralib.allocator.slices import DeviceInfo
from dralib.allocator.types import AllocatedState

# counter set name -> counter name -> amount
CounterSets = dict[str, dict[str, Quantity]]

_ZERO = Quantity.parse("0")


def available_counters(pool: Pool, allocated_state: AllocatedState) -> CounterSets:
    """Counters of the pool minus those consumed by already allocated devices.

    The result may hold negative values; those just mean nothing is available.
    """
    available: CounterSets = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    is_allocated = allocated_state.is_device_allocated
    for group in (pool.slices, pool.slices_not_targeting_node):
        for info in group:
            for device in info.devices:
                if not device.consumes_counters_raw:
                    continue
                if not is_allocated((info.driver, info.pool, device.name)):
                    continue
                for set_name, counters in device.consumes_counters:
                    counter_set = available.get(set_name)
                    if counter_set is None:
                        # Upstream indexes a nil map here and skips every counter.
                        continue
                    for name, value in counters.items():
                        existing = counter_set.get(name)
                        if existing is None:
                            continue
                        counter_set[name] = existing.sub(value)
    return available


class CounterTracker:
    """Counters consumed by the devices of the current allocation attempt, per pool name."""

    def __init__(self, cache: dict[str, CounterSets], allocated_state: AllocatedState) -> None:
        # `cache` lives on the Allocator and survives across nodes, like upstream's.
        self._cache = cache
        self._allocated_state = allocated_state
        self.consumed: dict[str, CounterSets] = {}

    def try_consume(self, device: DeviceInfo, pool: Pool) -> bool:
        """Consume the device's counters; undo and return False if any counter is exceeded."""
        available = self._cache.get(pool.name)
        if available is None:
            available = available_counters(pool, self._allocated_state)
            self._cache[pool.name] = available
        consumed_for_pool = self.consumed.setdefault(pool.name, {})
        for set_name, counters in device.consumes_counters:
            consumed_set = consumed_for_pool.setdefault(set_name, {})
            for name, value in counters.items():
                current = consumed_set.get(name)
                consumed_set[name] = value if current is None else current.add(value)
        # Every counter of the pool is checked, not only the ones this device touches.
        for set_name, counters in available.items():
            consumed_set = consumed_for_pool.get(set_name) or {}
            for name, value in counters.items():
                if value < consumed_set.get(name, _ZERO):
                    self.release(device, pool)
                    return False
        return True

    def release(self, device: DeviceInfo, pool: Pool) -> None:
        """Give back the counters consumed by the device."""
        consumed_for_pool = self.consumed.get(pool.name)
        if consumed_for_pool is None:
            return
        for set_name, counters in device.consumes_counters:
            consumed_set = consumed_for_pool.get(set_name)
            if consumed_set is None:
                continue
            for name, value in counters.items():
                current = consumed_set.get(name, _ZERO)
                consumed_set[name] = current.sub(value)
