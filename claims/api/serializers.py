"""Serializers of the claims API: explicit fields; detail views add the normalized `obj`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from claims.api.whatif_serializers import ClaimDiagnosisSerializer
from claims.devices.health import claim_health, device_health
from claims.devices.states import refine_device_states
from claims.devices.usage import capacity_usage
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from inventory.api.serializers import KUBE_FIELDS, POOL_FIELDS
from inventory.models import Device, Pool
from inventory.visibility import EVERYTHING, hide_other_namespaces, visibility_for

NAMESPACED_FIELDS = [*KUBE_FIELDS[:2], "namespace", *KUBE_FIELDS[2:]]

ALLOCATED_FIELDS = [
    "id",
    "claim",
    "request",
    "driver",
    "pool",
    "device",
    "share_id",
    "admin_access",
    "consumed_capacity",
]
ALLOCATED_DETAIL_FIELDS = [
    "tolerations",
    "binding_conditions",
    "binding_failure_conditions",
    "conditions",
    "network_data",
    "data",
]


class AllocatedDeviceSerializer(serializers.ModelSerializer):
    """One allocation result, with the claim it belongs to by namespace and name."""

    claim_namespace = serializers.CharField(source="claim.namespace", read_only=True)
    claim_name = serializers.CharField(source="claim.name", read_only=True)

    class Meta:
        model = AllocatedDevice
        fields = [*ALLOCATED_FIELDS, "claim_namespace", "claim_name"]


class AllocatedDeviceDetailSerializer(AllocatedDeviceSerializer):
    class Meta(AllocatedDeviceSerializer.Meta):
        fields = [*AllocatedDeviceSerializer.Meta.fields, *ALLOCATED_DETAIL_FIELDS]


class ClaimAllocationSerializer(serializers.ModelSerializer):
    """An allocation result inside its claim's detail."""

    class Meta:
        model = AllocatedDevice
        fields = [*ALLOCATED_FIELDS, *ALLOCATED_DETAIL_FIELDS]


class ReservationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Reservation
        fields = ["api_group", "resource", "name", "consumer_uid"]


class ResourceClaimSerializer(serializers.ModelSerializer):
    class Meta:
        model = ResourceClaim
        fields = [
            *NAMESPACED_FIELDS,
            "state",
            "classic",
            "node_name",
            "device_classes",
            "request_count",
            "allocated_count",
            "template_name",
            "owner_pod",
        ]


class HealthEntrySerializer(serializers.Serializer):
    """One health fact about a device: a pod's report (KEP-4680), a NoExecute taint or rule, or
    a claim's device status conditions; `source` says which."""

    source = serializers.ChoiceField(choices=["pod", "taint", "taint-rule", "device-status"])
    resourceID = serializers.CharField(required=False, help_text="driver/pool/device")  # noqa: N815
    health = serializers.CharField(required=False, help_text="Healthy, Unhealthy or Unknown")
    pod = serializers.CharField(required=False)
    container = serializers.CharField(required=False)
    claim = serializers.CharField(required=False, allow_null=True)
    request = serializers.CharField(required=False)
    message = serializers.CharField(required=False, allow_null=True)
    rule = serializers.CharField(required=False)
    taint = serializers.DictField(required=False)
    conditions = serializers.ListField(child=serializers.DictField(), required=False)


@extend_schema_field(ClaimDiagnosisSerializer(allow_null=True))
class DiagnosisField(serializers.JSONField):
    """The stored diagnosis as written, holders in namespaces the reader may not see named by
    place only; typed for the schema by ClaimDiagnosisSerializer."""

    def to_representation(self, value: Any) -> Any:
        request = self.context.get("request")
        # No request: the project itself serializing, not a person reading.
        seen = visibility_for(request) if request is not None else EVERYTHING
        return super().to_representation(hide_other_namespaces(value, seen))


class ResourceClaimDetailSerializer(ResourceClaimSerializer):
    allocated_devices = ClaimAllocationSerializer(many=True, read_only=True)
    reservations = ReservationSerializer(many=True, read_only=True)
    diagnosis = DiagnosisField(
        read_only=True,
        allow_null=True,
        help_text="Why a pending claim does not fit (kept current).",
    )
    health = serializers.SerializerMethodField()

    @extend_schema_field(HealthEntrySerializer(many=True))
    def get_health(self, claim: ResourceClaim) -> list[dict[str, Any]]:
        return claim_health(claim)

    class Meta(ResourceClaimSerializer.Meta):
        fields = [
            *ResourceClaimSerializer.Meta.fields,
            "allocated_devices",
            "reservations",
            "diagnosis",
            "diagnosed_at",
            "health",
            "obj",
        ]


class ResourceClaimTemplateSerializer(serializers.ModelSerializer):
    class Meta:
        model = ResourceClaimTemplate
        fields = [*NAMESPACED_FIELDS, "device_classes"]


class ResourceClaimTemplateDetailSerializer(ResourceClaimTemplateSerializer):
    class Meta(ResourceClaimTemplateSerializer.Meta):
        fields = [*ResourceClaimTemplateSerializer.Meta.fields, "obj"]


class PodSerializer(serializers.ModelSerializer):
    class Meta:
        model = Pod
        fields = [
            *NAMESPACED_FIELDS,
            "phase",
            "node_name",
            "uses_claims",
            "priority",
            "cpu_request",
            "memory_request",
            "storage_request",
            "other_requests",
            "host_ports",
            "resource_claims",
            "claim_statuses",
        ]


class PodDetailSerializer(PodSerializer):
    class Meta(PodSerializer.Meta):
        fields = [*PodSerializer.Meta.fields, "container_claims", "obj"]


class ResourceQuotaSerializer(serializers.ModelSerializer):
    class Meta:
        model = ResourceQuota
        fields = [*NAMESPACED_FIELDS, "hard", "used"]


class ResourceQuotaDetailSerializer(ResourceQuotaSerializer):
    class Meta(ResourceQuotaSerializer.Meta):
        fields = [*ResourceQuotaSerializer.Meta.fields, "obj"]


class PodSchedulingContextSerializer(serializers.ModelSerializer):
    class Meta:
        model = PodSchedulingContext
        fields = [*NAMESPACED_FIELDS, "selected_node", "potential_nodes"]


class PodSchedulingContextDetailSerializer(PodSchedulingContextSerializer):
    class Meta(PodSchedulingContextSerializer.Meta):
        fields = [*PodSchedulingContextSerializer.Meta.fields, "obj"]


COUNT_FIELDS = [
    "devices_total",
    "devices_allocated",
    "devices_shared",
    "devices_admin",
    "devices_tainted",
    "devices_free",
]


class PoolSerializer(serializers.ModelSerializer):
    """A pool with the device counts of `claims.devices.counts.pool_utilisation`."""

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


class DeviceListSerializer(serializers.ListSerializer):
    """Refines the whole page at once: `refine_device_states` is a fixed number of queries for
    any list, where refining device by device would be a few queries per row."""

    def to_representation(self, data: Any) -> list[Any]:
        devices = list(data.all() if hasattr(data, "all") else data)
        refine_device_states(devices)
        return super().to_representation(devices)


class DeviceSerializer(serializers.ModelSerializer):
    """A device with its state from `claims.devices.states.annotate_device_state`, refined by
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
            "health",
        ]

    health = serializers.SerializerMethodField()

    @extend_schema_field(CapacityUsageSerializer(many=True))
    def get_capacity_usage(self, device: Device) -> list[dict[str, Any]]:
        return capacity_usage(device)

    @extend_schema_field(HealthEntrySerializer(many=True))
    def get_health(self, device: Device) -> list[dict[str, Any]]:
        return device_health(device)


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


class AvailabilityQuerySerializer(serializers.Serializer):
    """The filters of `GET /api/inventory/availability/`; each narrows which units count."""

    node = serializers.CharField(
        required=False, default="", max_length=253, help_text="Units local to this node."
    )
    pool = serializers.RegexField(
        r"^[^/]+/.+$",
        required=False,
        default="",
        max_length=507,
        help_text="Units of one pool, as driver/pool.",
        error_messages={"invalid": "expected driver/pool (e.g. gpu.example.com/node-0001)"},
    )
    driver = serializers.CharField(
        required=False, default="", max_length=253, help_text="Units of this driver's pools."
    )
    device_class = serializers.CharField(
        required=False, default="", max_length=253, help_text="Only this DeviceClass."
    )

    def get_fields(self) -> dict[str, Any]:
        # `class` is a Python keyword: the parameter keeps its Kubernetes word.
        fields = super().get_fields()
        fields["class"] = fields.pop("device_class")
        return fields


class UnitCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    free = serializers.IntegerField(help_text="A new claim could get it now.")


class PartitionCountsSerializer(serializers.Serializer):
    profile = serializers.CharField(
        help_text="The slice's partitionTypeAttribute value, else the `profile` attribute, "
        "else what the partition takes from its counter set (`memory=10Gi ...`)."
    )
    total = serializers.IntegerField(help_text="Partitions of this profile the class selects.")
    free = serializers.IntegerField(help_text="Of those, not held, not tainted, not blocked.")
    parents = serializers.IntegerField(help_text="Units (counter sets) these partitions are on.")
    parentsWithFree = serializers.IntegerField(  # noqa: N815 (the API's camelCase)
        help_text="Units with at least one free partition of this profile."
    )


class ClassAvailabilitySerializer(serializers.Serializer):
    """Availability of one DeviceClass in physical units (see `claims.devices.availability`)."""

    deviceClass = serializers.CharField()  # noqa: N815 (the API's camelCase)
    physical = UnitCountsSerializer(
        allow_null=True,
        help_text="Physical units the class selects: devices, and counter sets whose "
        "partitions it selects (null when a selector does not compile).",
    )
    devices = UnitCountsSerializer(
        allow_null=True, help_text="Devices the class selects, partitions and whole devices."
    )
    partitions = PartitionCountsSerializer(
        many=True, help_text="Partitions the class selects, per profile; never in `physical`."
    )
    celErrors = serializers.IntegerField(  # noqa: N815 (the API's camelCase)
        help_text="Devices on which a selector raised a CEL runtime error (counted as no match)."
    )
    error = serializers.CharField(
        allow_null=True, help_text="The compile error, or the first runtime error."
    )


class AvailabilitySerializer(serializers.Serializer):
    definition = serializers.CharField(help_text="What a physical unit is and when it is free.")
    results = ClassAvailabilitySerializer(many=True)
