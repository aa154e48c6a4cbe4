"""Read-only admin for the synced inventory: the cluster is the source of truth, not this site."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from inventory.models import (
    CounterSet,
    Device,
    DeviceClass,
    DeviceTaintRule,
    Node,
    Pool,
    ResourceClass,
    ResourceSlice,
    SkippedObject,
    SyncState,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, never added, changed or deleted here: the next sync would undo any edit."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


KUBE_DISPLAY = ("name", "api_version", "resource_version", "synced_at")


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = (*KUBE_DISPLAY, "ready", "unschedulable")
    list_filter = ("ready", "unschedulable")
    search_fields = ("name", "uid")


@admin.register(DeviceClass)
class DeviceClassAdmin(ReadOnlyAdmin):
    list_display = (*KUBE_DISPLAY, "extended_resource_name")
    search_fields = ("name", "uid")


@admin.register(ResourceClass)
class ResourceClassAdmin(ReadOnlyAdmin):
    list_display = (*KUBE_DISPLAY, "driver_name")
    list_filter = ("driver_name",)
    search_fields = ("name", "uid")


@admin.register(Pool)
class PoolAdmin(ReadOnlyAdmin):
    list_display = ("driver", "name", "generation", "slices_seen", "complete", "device_count")
    list_filter = ("driver", "complete")
    search_fields = ("name", "driver", "node_name")


@admin.register(ResourceSlice)
class ResourceSliceAdmin(ReadOnlyAdmin):
    list_display = ("name", "driver", "pool_name", "generation", "current", "node_name")
    list_filter = ("driver", "current", "classic")
    search_fields = ("name", "pool_name", "node_name", "uid")


@admin.register(Device)
class DeviceAdmin(ReadOnlyAdmin):
    list_display = ("name", "driver", "pool_name", "node_name", "current", "tainted")
    list_filter = ("driver", "current", "tainted", "allow_multiple_allocations")
    search_fields = ("name", "pool_name", "node_name")
    list_select_related = ("pool",)


@admin.register(CounterSet)
class CounterSetAdmin(ReadOnlyAdmin):
    list_display = ("name", "pool", "slice")
    list_select_related = ("pool", "slice")
    search_fields = ("name",)


@admin.register(DeviceTaintRule)
class DeviceTaintRuleAdmin(ReadOnlyAdmin):
    list_display = (*KUBE_DISPLAY, "driver", "pool_name", "device_name")
    search_fields = ("name", "driver", "pool_name", "device_name")


@admin.register(SyncState)
class SyncStateAdmin(ReadOnlyAdmin):
    list_display = ("kind", "served_version", "resource_version", "object_count", "heartbeat_at")
    list_filter = ("served",)


@admin.register(SkippedObject)
class SkippedObjectAdmin(ReadOnlyAdmin):
    list_display = ("kind", "namespace", "name", "field", "seen_at")
    list_filter = ("kind",)
    search_fields = ("name", "namespace", "error")
