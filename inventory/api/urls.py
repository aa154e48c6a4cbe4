"""Routes of the inventory API, mounted at /api/inventory/ (kebab-case plural paths).

The root URLconf (`console.urls`) builds the /api/inventory/ router from these routes and the
claims app's `INVENTORY_ROUTES` (pools and devices, whose counts and states need allocations).
"""

from __future__ import annotations

from inventory.api import views

ROUTES = (
    ("nodes", views.NodeViewSet),
    ("device-classes", views.DeviceClassViewSet),
    ("resource-classes", views.ResourceClassViewSet),
    ("resource-slices", views.ResourceSliceViewSet),
    ("counter-sets", views.CounterSetViewSet),
    ("device-taint-rules", views.DeviceTaintRuleViewSet),
    ("sync-status", views.SyncStateViewSet),
    ("skipped-objects", views.SkippedObjectViewSet),
)
