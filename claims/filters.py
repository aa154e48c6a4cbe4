"""FilterSets of the claims app: one per model, shared by the HTML list pages and the API."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Exists, OuterRef, QuerySet

from claims.choices import ClaimState
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from inventory.filters import BooleanFilter, dns_name, json_list_contains, with_json_text


class NamespacedFilterSet(django_filters.FilterSet):
    """`namespace`, `name` (exact) and `q` (name contains) on every namespaced object."""

    namespace = django_filters.CharFilter()
    name = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")


class DeviceClassMixin(django_filters.FilterSet):
    """`class=<DeviceClass>`: objects whose requests name that class."""

    device_class = django_filters.CharFilter(method="filter_class", label="DeviceClass")

    def filter_class(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        if not value:
            return qs
        dns_name(value, what="class")
        return with_json_text(qs, "device_classes").filter(
            json_list_contains("device_classes", value)
        )


def _rename_class(filterset: type[django_filters.FilterSet]) -> None:
    # `class` is a Python keyword: expose the parameter under its Kubernetes word.
    filterset.base_filters["class"] = filterset.base_filters.pop("device_class")


class ResourceClaimFilterSet(NamespacedFilterSet, DeviceClassMixin):
    state = django_filters.MultipleChoiceFilter(choices=ClaimState.choices)
    node = django_filters.CharFilter(field_name="node_name")
    classic = BooleanFilter()
    template = django_filters.CharFilter(field_name="template_name")
    driver = django_filters.CharFilter(method="filter_allocated", label="Allocated from driver")
    pool = django_filters.CharFilter(method="filter_allocated", label="Allocated from pool")

    class Meta:
        model = ResourceClaim
        fields = ["namespace", "name", "state", "node", "classic", "template", "driver", "pool"]

    def filter_allocated(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        if not value:
            return qs
        # Exists rather than a join: a claim holding several devices is listed once.
        held = AllocatedDevice.objects.filter(claim=OuterRef("pk"), **{name: value})
        return qs.filter(Exists(held))


class ResourceClaimTemplateFilterSet(NamespacedFilterSet, DeviceClassMixin):
    class Meta:
        model = ResourceClaimTemplate
        fields = ["namespace", "name"]


class PodFilterSet(NamespacedFilterSet):
    node = django_filters.CharFilter(field_name="node_name")
    phase = django_filters.ChoiceFilter(
        choices=[(p, p) for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown")]
    )

    class Meta:
        model = Pod
        fields = ["namespace", "name", "node", "phase"]


class ResourceQuotaFilterSet(NamespacedFilterSet):
    class Meta:
        model = ResourceQuota
        fields = ["namespace", "name"]


class PodSchedulingContextFilterSet(NamespacedFilterSet):
    node = django_filters.CharFilter(field_name="selected_node")

    class Meta:
        model = PodSchedulingContext
        fields = ["namespace", "name", "node"]


class AllocatedDeviceFilterSet(django_filters.FilterSet):
    namespace = django_filters.CharFilter(field_name="claim__namespace")
    claim = django_filters.CharFilter(field_name="claim__name")
    node = django_filters.CharFilter(field_name="claim__node_name")
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter()
    device = django_filters.CharFilter()
    request = django_filters.CharFilter()
    admin_access = BooleanFilter()

    class Meta:
        model = AllocatedDevice
        fields = ["namespace", "claim", "node", "driver", "pool", "device", "request"]


_rename_class(ResourceClaimFilterSet)
_rename_class(ResourceClaimTemplateFilterSet)
