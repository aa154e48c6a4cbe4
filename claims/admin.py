"""Read-only admin for synced claims, pods and quotas (edits would be undone by the next sync)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from inventory.admin import ReadOnlyAdmin

NAMESPACED_DISPLAY = ("namespace", "name", "api_version", "resource_version", "synced_at")


class AllocatedDeviceInline(admin.TabularInline):
    model = AllocatedDevice
    fields = ("request", "driver", "pool", "device", "share_id", "admin_access")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReservationInline(admin.TabularInline):
    model = Reservation
    fields = ("resource", "name", "consumer_uid")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ResourceClaim)
class ResourceClaimAdmin(ReadOnlyAdmin):
    list_display = (*NAMESPACED_DISPLAY, "state", "node_name", "allocated_count")
    list_filter = ("state", "classic", "namespace")
    search_fields = ("name", "namespace", "uid", "owner_pod")
    inlines = (AllocatedDeviceInline, ReservationInline)


@admin.register(ResourceClaimTemplate)
class ResourceClaimTemplateAdmin(ReadOnlyAdmin):
    list_display = NAMESPACED_DISPLAY
    list_filter = ("namespace",)
    search_fields = ("name", "namespace", "uid")


@admin.register(AllocatedDevice)
class AllocatedDeviceAdmin(ReadOnlyAdmin):
    list_display = ("claim", "request", "driver", "pool", "device", "admin_access")
    list_filter = ("driver", "admin_access")
    search_fields = ("device", "pool", "claim__name", "claim__namespace")
    list_select_related = ("claim",)


@admin.register(Pod)
class PodAdmin(ReadOnlyAdmin):
    list_display = (*NAMESPACED_DISPLAY, "phase", "node_name")
    list_filter = ("phase", "namespace")
    search_fields = ("name", "namespace", "uid", "node_name")


@admin.register(ResourceQuota)
class ResourceQuotaAdmin(ReadOnlyAdmin):
    list_display = NAMESPACED_DISPLAY
    list_filter = ("namespace",)
    search_fields = ("name", "namespace")


@admin.register(PodSchedulingContext)
class PodSchedulingContextAdmin(ReadOnlyAdmin):
    list_display = (*NAMESPACED_DISPLAY, "selected_node")
    search_fields = ("name", "namespace", "selected_node")
