"""Read-only API of the inventory: each viewset is a few attributes on `ReadOnlyViewSet`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from dashboard.api import ReadOnlyViewSet
from inventory import filters
from inventory.api import serializers
from inventory.models import (
    CounterSet,
    DeviceClass,
    DeviceTaintRule,
    Node,
    ResourceClass,
    ResourceSlice,
    SkippedObject,
    SyncState,
)
from inventory.visibility import scope_namespaced, visibility_for

KUBE_ORDERING = ("pk", "name", "resource_version", "synced_at")


class NodeViewSet(ReadOnlyViewSet):
    queryset = Node.objects.all()
    serializer_class = serializers.NodeSerializer
    detail_serializer_class = serializers.NodeDetailSerializer
    filterset_class = filters.NodeFilterSet
    ordering = ("name",)
    ordering_fields = (*KUBE_ORDERING, "ready", "unschedulable")


class DeviceClassViewSet(ReadOnlyViewSet):
    queryset = DeviceClass.objects.all()
    serializer_class = serializers.DeviceClassSerializer
    detail_serializer_class = serializers.DeviceClassDetailSerializer
    filterset_class = filters.DeviceClassFilterSet
    ordering = ("name",)
    ordering_fields = KUBE_ORDERING


class ResourceClassViewSet(ReadOnlyViewSet):
    queryset = ResourceClass.objects.all()
    serializer_class = serializers.ResourceClassSerializer
    detail_serializer_class = serializers.ResourceClassDetailSerializer
    filterset_class = filters.ResourceClassFilterSet
    ordering = ("name",)
    ordering_fields = (*KUBE_ORDERING, "driver_name")


class ResourceSliceViewSet(ReadOnlyViewSet):
    queryset = ResourceSlice.objects.all()
    serializer_class = serializers.ResourceSliceSerializer
    detail_serializer_class = serializers.ResourceSliceDetailSerializer
    filterset_class = filters.ResourceSliceFilterSet
    ordering = ("name",)
    ordering_fields = (*KUBE_ORDERING, "driver", "pool_name", "generation", "node_name")


class CounterSetViewSet(ReadOnlyViewSet):
    queryset = CounterSet.objects.all()
    serializer_class = serializers.CounterSetSerializer
    filterset_class = filters.CounterSetFilterSet
    raw_field = None
    list_defer = ()
    ordering_fields = ("pk", "name")


class DeviceTaintRuleViewSet(ReadOnlyViewSet):
    queryset = DeviceTaintRule.objects.all()
    serializer_class = serializers.DeviceTaintRuleSerializer
    detail_serializer_class = serializers.DeviceTaintRuleDetailSerializer
    filterset_class = filters.DeviceTaintRuleFilterSet
    ordering = ("name",)
    ordering_fields = (*KUBE_ORDERING, "driver", "pool_name", "device_name")


class SyncStateViewSet(ReadOnlyViewSet):
    """The sync cursor and health of each kind."""

    queryset = SyncState.objects.all()
    serializer_class = serializers.SyncStateSerializer
    filterset_class = filters.SyncStateFilterSet
    raw_field = None
    list_defer = ()
    ordering = ("kind",)
    ordering_fields = ("pk", "kind", "object_count", "events_total", "skipped")


class SkippedObjectViewSet(ReadOnlyViewSet):
    """Objects the sync could not normalize, with the field and the reason."""

    queryset = SkippedObject.objects.all()
    serializer_class = serializers.SkippedObjectSerializer
    filterset_class = filters.SkippedObjectFilterSet
    raw_field = None
    list_defer = ()
    ordering = ("-seen_at",)
    ordering_fields = ("pk", "kind", "name", "seen_at")

    def get_queryset(self) -> QuerySet[Any]:
        # A namespaced object the sync skipped is shown only to those who may see its namespace.
        return scope_namespaced(
            super().get_queryset(), visibility_for(self.request), cluster_scoped=True
        )
