"""Serializers of the claims API: explicit fields; detail views add the normalized `obj`."""

from __future__ import annotations

from rest_framework import serializers

from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    Reservation,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from inventory.api.serializers import KUBE_FIELDS

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


class ResourceClaimDetailSerializer(ResourceClaimSerializer):
    allocated_devices = ClaimAllocationSerializer(many=True, read_only=True)
    reservations = ReservationSerializer(many=True, read_only=True)

    class Meta(ResourceClaimSerializer.Meta):
        fields = [
            *ResourceClaimSerializer.Meta.fields,
            "allocated_devices",
            "reservations",
            "diagnosis",
            "diagnosed_at",
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
        fields = [*NAMESPACED_FIELDS, "phase", "node_name", "resource_claims", "claim_statuses"]


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
