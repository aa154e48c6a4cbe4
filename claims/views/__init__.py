"""The claims app's pages. Which module holds what:

- `claims/views/` takes a request and returns a page, nothing more (STYLE: views only
  translate), one module per area: `devices` (what the cluster offers, with the claims on it:
  pools, devices, DeviceClasses, taint rules, classic ResourceClasses, nodes), `claims` (what asks
  for devices: claims, templates, pods, scheduling contexts, quotas) and `reports` (computed
  across kinds: leaks, search). A new page goes into the module of its kind's area.
- `claims/pages.py` and `claims/devices/pages.py` compute what those pages show from rows, with
  no request (quota lines, template use, pool grids, holders, leak ages, what-if results); the
  console's pages reuse them.
- `claims/views/missing.py`: the 404 that names an object not in the cluster, and the redirect
  of old id links. Detail URLs carry Kubernetes names (`claims/urls.py`), never row ids.
- `claims/api/` is the REST API of the same objects.

Every view is re-exported here, so `claims/urls.py` names them as `views.<name>`.
"""

from claims.views.claims import (
    claim_detail,
    claim_list,
    pod_detail,
    pod_list,
    quota_list,
    scheduling_context_list,
    template_detail,
    template_list,
)
from claims.views.devices import (
    device_by_id,
    device_class_detail,
    device_class_list,
    device_detail,
    device_list,
    node_detail,
    node_list,
    pool_by_id,
    pool_detail,
    pool_list,
    resource_class_list,
    taint_rule_list,
)
from claims.views.reports import leak_list, search

__all__ = [
    "claim_detail",
    "claim_list",
    "device_by_id",
    "device_class_detail",
    "device_class_list",
    "device_detail",
    "device_list",
    "leak_list",
    "node_detail",
    "node_list",
    "pod_detail",
    "pod_list",
    "pool_by_id",
    "pool_detail",
    "pool_list",
    "quota_list",
    "resource_class_list",
    "scheduling_context_list",
    "search",
    "taint_rule_list",
    "template_detail",
    "template_list",
]
