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

`claims/urls.py` names each view by its module, so a new page touches its module and the URL
conf, not this file.
"""
