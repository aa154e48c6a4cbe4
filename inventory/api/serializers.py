"""Serializers of the inventory API: explicit fields; detail views add the normalized `obj`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

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
from inventory.services import capacity_usage, class_driver, refine_device_states

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
        return class_driver(device_class)


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
COUNT_FIELDS = [
    "devices_total",
    "devices_allocated",
    "devices_shared",
    "devices_admin",
    "devices_tainted",
    "devices_free",
]


class PoolSerializer(serializers.ModelSerializer):
    """A pool with the device counts of `inventory.services.pool_utilisation`."""

    devices_total = serializers.IntegerField(read_only=True)
    devices_allocated = serializers.IntegerField(read_only=True)
    devices_shared = serializers.IntegerField(read_only=True)
    devices_admin = serializers.IntegerField(read_only=True)
    devices_tainted = serializers.IntegerField(
        read_only=True, help_text="Tainted and not allocated."
    )
    devices_free = serializers.IntegerField(
        read_only=True, help_text="Neither allocated nor tainted (admin-access use included)."
    )

    class Meta:
        model = Pool
        fields = [*POOL_FIELDS, *COUNT_FIELDS]


class CounterUsageSerializer(serializers.Serializer):
    counter_set = serializers.CharField()
    counter = serializers.CharField()
    capacity = serializers.CharField()
    consumed = serializers.CharField()
    available = serializers.CharField()


class PoolUtilisationSerializer(PoolSerializer):
    counters = CounterUsageSerializer(many=True, read_only=True)

    class Meta(PoolSerializer.Meta):
        fields = [*PoolSerializer.Meta.fields, "counters"]


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


class DeviceListSerializer(serializers.ListSerializer):
    """Refines the whole page at once: `refine_device_states` is a fixed number of queries for
    any list, where refining device by device would be a few queries per row."""

    def to_representation(self, data: Any) -> list[Any]:
        devices = list(data.all() if hasattr(data, "all") else data)
        refine_device_states(devices)
        return super().to_representation(devices)


class DeviceSerializer(serializers.ModelSerializer):
    """A device with its state from `inventory.services.annotate_device_state`, refined by
    `refine_device_states` into `effective_state`, `blocked` and `unhealthy` (once per page)."""

    key = serializers.CharField(read_only=True, help_text="driver/pool/device")
    state = serializers.CharField(
        read_only=True,
        help_text="free, allocated, shared, admin or tainted: what the `state` filter and "
        "ordering use (computed in SQL).",
    )
    allocated = serializers.BooleanField(read_only=True)
    shared = serializers.BooleanField(read_only=True)
    admin_access = serializers.BooleanField(read_only=True)
    tainted = serializers.BooleanField(
        source="is_tainted", read_only=True, help_text="Own taints or a DeviceTaintRule."
    )
    effective_state = serializers.CharField(
        read_only=True,
        help_text="The state the pool grid shows: `state`, except unhealthy (wins over all) and "
        "blocked (instead of free when the shared counters left cannot cover the device).",
    )
    blocked = serializers.BooleanField(
        read_only=True,
        help_text="Not held, but the pool's shared counters left cannot cover it "
        "(`?state=blocked`).",
    )
    unhealthy = serializers.BooleanField(
        read_only=True,
        help_text="A NoExecute taint (own or DeviceTaintRule) or a Ready=False device condition "
        "(`?state=unhealthy`).",
    )

    class Meta:
        model = Device
        list_serializer_class = DeviceListSerializer
        fields = [
            "id",
            "key",
            "slice",
            "pool",
            "driver",
            "pool_name",
            "name",
            "current",
            "node_name",
            "all_nodes",
            "attributes",
            "capacity",
            "allow_multiple_allocations",
            "taints",
            "state",
            "allocated",
            "shared",
            "admin_access",
            "tainted",
            "effective_state",
            "blocked",
            "unhealthy",
        ]

    def to_representation(self, instance: Device) -> dict[str, Any]:
        if not hasattr(instance, "effective_state"):  # not refined with its page
            refine_device_states([instance])
        return super().to_representation(instance)


class CapacityUsageSerializer(serializers.Serializer):
    capacity = serializers.CharField()
    value = serializers.CharField()
    consumed = serializers.CharField()
    available = serializers.CharField()
    allocations = serializers.IntegerField()


class DeviceDetailSerializer(DeviceSerializer):
    """Adds the device's full spec, counters consumed, binding conditions and capacity usage."""

    capacity_usage = serializers.SerializerMethodField()

    class Meta(DeviceSerializer.Meta):
        fields = [
            *DeviceSerializer.Meta.fields,
            "node_selector",
            "consumes_counters",
            "binds_to_node",
            "binding_conditions",
            "binding_failure_conditions",
            "spec",
            "capacity_usage",
        ]

    @extend_schema_field(CapacityUsageSerializer(many=True))
    def get_capacity_usage(self, device: Device) -> list[dict[str, Any]]:
        return capacity_usage(device)


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
    class Meta:
        model = SyncState
        fields = [
            "id",
            "kind",
            "served_version",
            "served",
            "resource_version",
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


class ClassDeviceCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    allocated = serializers.IntegerField()
    shared = serializers.IntegerField()
    admin = serializers.IntegerField()
    tainted = serializers.IntegerField()
    free = serializers.IntegerField()


class ClassUtilisationEntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    driver = serializers.CharField(allow_null=True)
    approximate = serializers.BooleanField()
    devices = ClassDeviceCountsSerializer(allow_null=True)


class ClassUtilisationSerializer(serializers.Serializer):
    method = serializers.CharField(help_text="How devices were attributed to classes.")
    classes = ClassUtilisationEntrySerializer(many=True)
