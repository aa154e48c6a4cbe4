"""FilterSets of the inventory: one per model, shared by the HTML list pages and the API.

Every parameter is a plain GET value (`?driver=x&node=worker-1`) and every wrong value is a form
error, which the API turns into a 400 naming the parameter. Device filters that read allocations
live in `claims.filters`.
"""

from __future__ import annotations

import django_filters

from dashboard.filters import BooleanFilter
from inventory.choices import Kind
from inventory.models import (
    CounterSet,
    DeviceClass,
    DeviceTaintRule,
    Node,
    Pool,
    ResourceClass,
    ResourceSlice,
    SkippedObject,
    SyncState,
)


class KubeObjectFilterSet(django_filters.FilterSet):
    """`name` (exact) and `q` (name contains) on every synced object."""

    name = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")


class NodeFilterSet(KubeObjectFilterSet):
    ready = BooleanFilter()
    unschedulable = BooleanFilter()

    class Meta:
        model = Node
        fields = ["name", "ready", "unschedulable"]


class DeviceClassFilterSet(KubeObjectFilterSet):
    class Meta:
        model = DeviceClass
        fields = ["name"]


class ResourceClassFilterSet(KubeObjectFilterSet):
    driver = django_filters.CharFilter(field_name="driver_name")

    class Meta:
        model = ResourceClass
        fields = ["name", "driver"]


class PoolFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    driver = django_filters.CharFilter()
    node = django_filters.CharFilter(field_name="node_name")
    complete = BooleanFilter()

    class Meta:
        model = Pool
        fields = ["name", "driver", "node", "complete"]


class ResourceSliceFilterSet(KubeObjectFilterSet):
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter(field_name="pool_name")
    node = django_filters.CharFilter(field_name="node_name")
    current = BooleanFilter()
    classic = BooleanFilter()

    class Meta:
        model = ResourceSlice
        fields = ["name", "driver", "pool", "node", "current", "classic"]


class CounterSetFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter()
    driver = django_filters.CharFilter(field_name="pool__driver")
    pool = django_filters.CharFilter(field_name="pool__name")
    node = django_filters.CharFilter(field_name="slice__node_name")

    class Meta:
        model = CounterSet
        fields = ["name", "driver", "pool", "node"]


class DeviceTaintRuleFilterSet(KubeObjectFilterSet):
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter(field_name="pool_name")
    device = django_filters.CharFilter(field_name="device_name")

    class Meta:
        model = DeviceTaintRule
        fields = ["name", "driver", "pool", "device"]


class SyncStateFilterSet(django_filters.FilterSet):
    kind = django_filters.MultipleChoiceFilter(choices=Kind.choices)
    served = BooleanFilter()

    class Meta:
        model = SyncState
        fields = ["kind", "served"]


class SkippedObjectFilterSet(django_filters.FilterSet):
    kind = django_filters.MultipleChoiceFilter(choices=Kind.choices)
    namespace = django_filters.CharFilter()
    name = django_filters.CharFilter()

    class Meta:
        model = SkippedObject
        fields = ["kind", "namespace", "name"]
