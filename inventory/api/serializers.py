"""Serializers of the inventory API: explicit fields; detail views add the normalized `obj`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

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

KUBE_FIELDS = [
    "id",
    "uid",
    "name",
    "api_version",
    "resource_version",
    "created_at",
    "labels",
    "synced_at",
]


class NodeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Node
        fields = [*KUBE_FIELDS, "ready", "unschedulable"]


class NodeDetailSerializer(NodeSerializer):
    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "obj"]


class DeviceClassSerializer(serializers.ModelSerializer):
    driver = serializers.SerializerMethodField(
        help_text='The driver when the only selector is `device.driver == "x"`, else null.'
    )

    class Meta:
        model = DeviceClass
        fields = [*KUBE_FIELDS, "selectors", "extended_resource_name", "driver"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_driver(self, device_class: DeviceClass) -> str | None:
        return device_class.selected_driver


class DeviceClassDetailSerializer(DeviceClassSerializer):
    class Meta(DeviceClassSerializer.Meta):
        fields = [*DeviceClassSerializer.Meta.fields, "config", "obj"]


class ResourceClassSerializer(serializers.ModelSerializer):
    class Meta:
        model = ResourceClass
        fields = [*KUBE_FIELDS, "driver_name"]


class ResourceClassDetailSerializer(ResourceClassSerializer):
    class Meta(ResourceClassSerializer.Meta):
        fields = [*ResourceClassSerializer.Meta.fields, "obj"]


POOL_FIELDS = [
    "id",
    "driver",
    "name",
    "generation",
    "resource_slice_count",
    "slices_seen",
    "complete",
    "node_name",
    "device_count",
]


class ResourceSliceSerializer(serializers.ModelSerializer):
    class Meta:
        model = ResourceSlice
        fields = [
            *KUBE_FIELDS,
            "pool",
            "driver",
            "pool_name",
            "generation",
            "current",
            "node_name",
            "all_nodes",
            "per_device_node_selection",
            "classic",
        ]


class ResourceSliceDetailSerializer(ResourceSliceSerializer):
    class Meta(ResourceSliceSerializer.Meta):
        fields = [*ResourceSliceSerializer.Meta.fields, "node_selector", "shared_counters", "obj"]


class CounterSetSerializer(serializers.ModelSerializer):
    class Meta:
        model = CounterSet
        fields = ["id", "slice", "pool", "name", "counters"]


class DeviceTaintRuleSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeviceTaintRule
        fields = [*KUBE_FIELDS, "driver", "pool_name", "device_name", "taint"]


class DeviceTaintRuleDetailSerializer(DeviceTaintRuleSerializer):
    class Meta(DeviceTaintRuleSerializer.Meta):
        fields = [*DeviceTaintRuleSerializer.Meta.fields, "obj"]


class SyncStateSerializer(serializers.ModelSerializer):
    health = serializers.CharField(
        read_only=True, help_text="not-served, error, stale or ok (see SyncState.health)."
    )

    class Meta:
        model = SyncState
        fields = [
            "id",
            "kind",
            "served_version",
            "served",
            "not_served_reason",
            "health",
            "resource_version",
            "cluster_uid",
            "cursor_valid",
            "verified_at",
            "object_count",
            "events_total",
            "events_per_second",
            "last_event_at",
            "last_list_at",
            "heartbeat_at",
            "watcher",
            "last_error",
            "last_error_at",
            "skipped",
        ]


class SkippedObjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = SkippedObject
        fields = ["id", "kind", "namespace", "name", "api_version", "field", "error", "seen_at"]
