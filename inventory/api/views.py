"""Read-only API of the inventory: each viewset is a few attributes on `ReadOnlyViewSet`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.api import ReadOnlyViewSet, StrictOrderingFilter
from inventory import filters
from inventory.api import serializers
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
from inventory.services import (
    annotate_device_state,
    counter_usage,
    pool_utilisation,
)

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


class PoolViewSet(ReadOnlyViewSet):
    """Pools with device counts of their current generation."""

    queryset = Pool.objects.all()
    serializer_class = serializers.PoolSerializer
    filterset_class = filters.PoolFilterSet
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


class ResourceSliceViewSet(ReadOnlyViewSet):
    queryset = ResourceSlice.objects.all()
    serializer_class = serializers.ResourceSliceSerializer
    detail_serializer_class = serializers.ResourceSliceDetailSerializer
    filterset_class = filters.ResourceSliceFilterSet
    ordering = ("name",)
    ordering_fields = (*KUBE_ORDERING, "driver", "pool_name", "generation", "node_name")


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


class PoolUtilisationView(generics.ListAPIView):
    """Device counts per pool (current generation only), filterable like the pool list."""

    queryset = Pool.objects.all()
    serializer_class = serializers.PoolSerializer
    filter_backends = [DjangoFilterBackend, StrictOrderingFilter]
    filterset_class = filters.PoolFilterSet
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
        from claims.classes import class_utilisation

        return Response(_ExactClassUtilisationSerializer(class_utilisation()).data)
