"""Devices joined with their holders: what the allocation side of the dashboard knows about devices.

- `states`: the SQL state columns (`annotate_device_state`) and the blocked / unhealthy
  refinements (`refine_device_states`, `blocked_device_ids`, `unhealthy_device_ids`);
- `counts`: device counts per pool and driver;
- `classes`: which devices each DeviceClass selects (CEL), and counts per class;
- `availability`: physical units per class (a device, or the counter set partitions share), free
  when a new claim could get them now, and partitions per profile;
- `usage`: shared counters and consumable capacity against what holders take;
- `pages`: pool grids, bar segments, reachable devices per node, matching taint rules;
- `health`: pods' device health reports (KEP-4680) and the health view of a device or claim;
- `poolstatus`: upstream's ResourcePoolStatusRequest (KEP-5677) answered from the same states.
- `history`: the utilisation samples the overview chart draws (`take_sample`).
"""
