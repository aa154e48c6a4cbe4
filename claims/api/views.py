"""Read-only API of the claims app: each viewset is a few attributes on `ReadOnlyViewSet`.

The what-if endpoint lives in `claims/api/whatif.py`; this module only reads.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from claims import filters
from claims.api import serializers
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from dashboard.api import ReadOnlyViewSet

NAMESPACED_ORDERING = ("pk", "namespace", "name", "resource_version", "synced_at")


class ResourceClaimViewSet(ReadOnlyViewSet):
    """Claims; the detail adds allocation results, reservations and the normalized object."""

    queryset = ResourceClaim.objects.all()
    serializer_class = serializers.ResourceClaimSerializer
    detail_serializer_class = serializers.ResourceClaimDetailSerializer
    filterset_class = filters.ResourceClaimFilterSet
    list_defer = ("raw", "obj", "diagnosis")
    ordering = ("name",)
    ordering_fields = (*NAMESPACED_ORDERING, "state", "node_name", "allocated_count")

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("allocated_devices", "reservations")
        return queryset


class ResourceClaimTemplateViewSet(ReadOnlyViewSet):
    queryset = ResourceClaimTemplate.objects.all()
    serializer_class = serializers.ResourceClaimTemplateSerializer
    detail_serializer_class = serializers.ResourceClaimTemplateDetailSerializer
    filterset_class = filters.ResourceClaimTemplateFilterSet
    ordering = ("name",)
    ordering_fields = NAMESPACED_ORDERING


class PodViewSet(ReadOnlyViewSet):
    """Pods that use ResourceClaims (other pods are not stored)."""

    queryset = Pod.objects.all()
    serializer_class = serializers.PodSerializer
    detail_serializer_class = serializers.PodDetailSerializer
    filterset_class = filters.PodFilterSet
    ordering = ("name",)
    ordering_fields = (*NAMESPACED_ORDERING, "phase", "node_name")


class ResourceQuotaViewSet(ReadOnlyViewSet):
    queryset = ResourceQuota.objects.all()
    serializer_class = serializers.ResourceQuotaSerializer
    detail_serializer_class = serializers.ResourceQuotaDetailSerializer
    filterset_class = filters.ResourceQuotaFilterSet
    ordering = ("name",)
    ordering_fields = NAMESPACED_ORDERING


class PodSchedulingContextViewSet(ReadOnlyViewSet):
    queryset = PodSchedulingContext.objects.all()
    serializer_class = serializers.PodSchedulingContextSerializer
    detail_serializer_class = serializers.PodSchedulingContextDetailSerializer
    filterset_class = filters.PodSchedulingContextFilterSet
    ordering = ("name",)
    ordering_fields = (*NAMESPACED_ORDERING, "selected_node")


class AllocatedDeviceViewSet(ReadOnlyViewSet):
    """Every allocation result of every claim, with the claim's namespace and name."""

    # The claim's own JSON is not needed here: keep it out of the join.
    queryset = AllocatedDevice.objects.select_related("claim").only(
        *serializers.ALLOCATED_FIELDS,
        *serializers.ALLOCATED_DETAIL_FIELDS,
        "claim__namespace",
        "claim__name",
    )
    serializer_class = serializers.AllocatedDeviceSerializer
    detail_serializer_class = serializers.AllocatedDeviceDetailSerializer
    filterset_class = filters.AllocatedDeviceFilterSet
    raw_field = None
    list_defer = ()
    ordering_fields = ("pk", "driver", "pool", "device", "request")
