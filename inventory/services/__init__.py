"""Utilisation of the inventory, computed in the database, and what its pages show.

A package past ~600 lines; every public name is re-exported here, so callers import from
`inventory.services`:

- `states`: the SQL state columns (`annotate_device_state`) and the blocked / unhealthy
  refinements (`refine_device_states`, `blocked_device_ids`, `unhealthy_device_ids`);
- `counts`: device counts per pool, driver and DeviceClass;
- `usage`: shared counters and consumable capacity against what holders take;
- `pages`: pool grids, bar segments, reachable devices per node, matching taint rules.
"""

from inventory.services.counts import (
    CLASS_COUNT_KEYS,
    COUNT_KEYS,
    class_driver,
    class_utilisation,
    driver_utilisation,
    pool_device_counts,
    pool_utilisation,
)
from inventory.services.pages import (
    STATE_LEGEND,
    bar_segments,
    grid_counts,
    holders_by_device,
    matching_taint_rules,
    pool_context,
    pool_grid,
    pool_segments,
    reachable_counts,
)
from inventory.services.states import (
    HELD_STATES,
    annotate_device_state,
    blocked_device_ids,
    refine_device_states,
    rule_taints,
    unhealthy_device_ids,
)
from inventory.services.usage import capacity_usage, capacity_usages, counter_usage

__all__ = [
    "CLASS_COUNT_KEYS",
    "COUNT_KEYS",
    "HELD_STATES",
    "STATE_LEGEND",
    "annotate_device_state",
    "bar_segments",
    "blocked_device_ids",
    "capacity_usage",
    "capacity_usages",
    "class_driver",
    "class_utilisation",
    "counter_usage",
    "driver_utilisation",
    "grid_counts",
    "holders_by_device",
    "matching_taint_rules",
    "pool_context",
    "pool_device_counts",
    "pool_grid",
    "pool_segments",
    "pool_utilisation",
    "reachable_counts",
    "refine_device_states",
    "rule_taints",
    "unhealthy_device_ids",
]
