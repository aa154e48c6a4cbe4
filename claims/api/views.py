"""Read-only API of the claims app: each viewset is a few attributes on `ReadOnlyViewSet`.

Pools and devices are served here, not by the inventory, because their counts and states depend
on allocations; the root URLconf mounts them under /api/inventory/ beside the inventory's kinds.
The what-if endpoint lives in `claims/api/whatif.py`; this module only reads.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims import filters
from claims.api import serializers
from claims.devices.availability import DEFINITION, AvailabilityScope, class_availability
from claims.devices.classes import class_utilisation
from claims.devices.counts import pool_utilisation
from claims.devices.states import annotate_device_state
from claims.devices.usage import counter_usage
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from dashboard.api import ReadOnlyViewSet, StrictOrderingFilter
from inventory.filters import PoolFilterSet
from inventory.models import Device, Pool
from inventory.visibility import scope_namespaced, visibility_for

NAMESPACED_ORDERING = ("pk", "namespace", "name", "resource_version", "synced_at")


class NamespacedViewSet(ReadOnlyViewSet):
    """A namespaced kind: lists and details only hold namespaces the person may see (another
    namespace's object answers 404, as one that does not exist)."""

    namespace_field: ClassVar[str] = "namespace"

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()
        return scope_namespaced(queryset, visibility_for(self.request), field=self.namespace_field)


class ResourceClaimViewSet(NamespacedViewSet):
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


class ResourceClaimTemplateViewSet(NamespacedViewSet):
    queryset = ResourceClaimTemplate.objects.all()
    serializer_class = serializers.ResourceClaimTemplateSerializer
    detail_serializer_class = serializers.ResourceClaimTemplateDetailSerializer
    filterset_class = filters.ResourceClaimTemplateFilterSet
    ordering = ("name",)
    ordering_fields = NAMESPACED_ORDERING


class PodViewSet(NamespacedViewSet):
    """Every pod: its projection (node, phase, requests, host ports); claim columns and the
    object (`obj`, detail) only for pods that use ResourceClaims."""

    queryset = Pod.objects.all()
    serializer_class = serializers.PodSerializer
    detail_serializer_class = serializers.PodDetailSerializer
    filterset_class = filters.PodFilterSet
    ordering = ("name",)
    ordering_fields = (*NAMESPACED_ORDERING, "phase", "node_name")


class ResourceQuotaViewSet(NamespacedViewSet):
    queryset = ResourceQuota.objects.all()
    serializer_class = serializers.ResourceQuotaSerializer
    detail_serializer_class = serializers.ResourceQuotaDetailSerializer
    filterset_class = filters.ResourceQuotaFilterSet
    ordering = ("name",)
    ordering_fields = NAMESPACED_ORDERING


class PodSchedulingContextViewSet(NamespacedViewSet):
    queryset = PodSchedulingContext.objects.all()
    serializer_class = serializers.PodSchedulingContextSerializer
    detail_serializer_class = serializers.PodSchedulingContextDetailSerializer
    filterset_class = filters.PodSchedulingContextFilterSet
    ordering = ("name",)
    ordering_fields = (*NAMESPACED_ORDERING, "selected_node")


class AllocatedDeviceViewSet(NamespacedViewSet):
    """Every allocation result of every claim, with the claim's namespace and name."""

    # The claim's own JSON is not needed here: keep it out of the join.
    queryset = AllocatedDevice.objects.select_related("claim").only(
        *serializers.ALLOCATED_FIELDS,
        *serializers.ALLOCATED_DETAIL_FIELDS,
        "claim__namespace",
        "claim__name",
    )
    serializer_class = serializers.AllocatedDeviceSerializer
    namespace_field = "claim__namespace"
    detail_serializer_class = serializers.AllocatedDeviceDetailSerializer
    filterset_class = filters.AllocatedDeviceFilterSet
    raw_field = None
    list_defer = ()
    ordering_fields = ("pk", "driver", "pool", "device", "request")


class PoolViewSet(ReadOnlyViewSet):
    """Pools with device counts of their current generation."""

    queryset = Pool.objects.all()
    serializer_class = serializers.PoolSerializer
    filterset_class = PoolFilterSet
    raw_field = None
    list_defer = ()
    ordering = ("pk",)
    ordering_fields = (
        "pk",
        "driver",
        "name",
        "generation",
        "complete",
        "node_name",
        "device_count",
    )

    def get_queryset(self) -> QuerySet[Any]:
        return pool_utilisation(super().get_queryset())

    @extend_schema(responses=serializers.PoolUtilisationSerializer)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def utilisation(self, request: Request, pk: str | None = None) -> Response:
        """Device counts of the pool, and its shared counters: capacity, consumed, available."""
        pool = self.get_object()
        pool.counters = counter_usage(pool)
        return Response(serializers.PoolUtilisationSerializer(pool).data)


class DeviceViewSet(ReadOnlyViewSet):
    """Devices with their allocation state; `?format=yaml` renders the published device entry."""

    queryset = annotate_device_state(Device.objects.all())
    serializer_class = serializers.DeviceSerializer
    detail_serializer_class = serializers.DeviceDetailSerializer
    filterset_class = filters.DeviceFilterSet
    raw_field = "spec"
    list_defer = ("spec", "binding_conditions", "binding_failure_conditions", "node_selector")
    ordering = ("pk",)
    ordering_fields = ("pk", "name", "driver", "pool_name", "node_name", "state")


class PoolUtilisationView(generics.ListAPIView):
    """Device counts per pool (current generation only), filterable like the pool list."""

    queryset = Pool.objects.all()
    serializer_class = serializers.PoolSerializer
    filter_backends = [DjangoFilterBackend, StrictOrderingFilter]
    filterset_class = PoolFilterSet
    ordering = ("pk",)
    ordering_fields = PoolViewSet.ordering_fields

    def get_queryset(self) -> QuerySet[Any]:
        return pool_utilisation(super().get_queryset())


class _ExactClassEntrySerializer(serializers.ClassUtilisationEntrySerializer):
    # The published keys plus what exact (CEL) membership adds; belongs in api/serializers.py.
    method = drf_serializers.CharField(help_text='How members were found: "cel".')
    cel_errors = drf_serializers.IntegerField(
        help_text="Devices on which a selector raised a CEL runtime error (counted as no match)."
    )
    error = drf_serializers.CharField(
        allow_null=True, help_text="The compile error, or the first runtime error."
    )


class _ExactClassUtilisationSerializer(serializers.ClassUtilisationSerializer):
    classes = _ExactClassEntrySerializer(many=True)


class ClassUtilisationView(APIView):
    """Device counts per DeviceClass: members are the devices all its CEL selectors match."""

    @extend_schema(responses=_ExactClassUtilisationSerializer)
    def get(self, request: Request) -> Response:
        # claims builds on inventory: its class membership is imported when asked for.

        return Response(_ExactClassUtilisationSerializer(class_utilisation()).data)


class AvailabilityView(APIView):
    """Availability per DeviceClass in physical units: a device, or the counter set that
    partitions share; free when a new claim could get it now. Partitions are counted per
    profile, apart. Filters narrow the units counted: `node` (local to it), `pool`
    (driver/pool), `driver`, `class`."""

    @extend_schema(
        parameters=[serializers.AvailabilityQuerySerializer],
        responses=serializers.AvailabilitySerializer,
    )
    def get(self, request: Request) -> Response:
        query = serializers.AvailabilityQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        scope = AvailabilityScope(node=data["node"], driver=data["driver"], pool=data["pool"])
        entries = class_availability(scope, device_class=data["class"])
        if data["class"] and not entries:
            raise ValidationError({"class": [f"DeviceClass {data['class']!r} does not exist"]})
        body = {"definition": DEFINITION, "results": entries}
        return Response(serializers.AvailabilitySerializer(body).data)
