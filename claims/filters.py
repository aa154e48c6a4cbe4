"""FilterSets of the claims app: one per model, shared by the HTML list pages and the API.

Devices are filtered here, not in the inventory, because their state depends on allocations.
"""

from __future__ import annotations

import re
from typing import Any

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from drf_spectacular.utils import extend_schema_field

from claims.choices import ClaimState, DeviceState
from claims.devices.availability import Grouping, annotate_units, unit_counts
from claims.devices.classes import class_membership
from claims.devices.states import annotate_device_state, blocked_device_ids, unhealthy_device_ids
from claims.models import (
    AllocatedDevice,
    Pod,
    PodSchedulingContext,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
)
from dashboard.filters import (
    BooleanFilter,
    DNSSubdomainFilter,
    ids_in,
    json_list_contains,
    with_json_text,
)
from inventory.filters import NodeFilterSet, PoolFilterSet
from inventory.models import Device, DeviceClass

# A device attribute name: an optional DNS domain and a C identifier (resource.k8s.io/v1).
_ATTRIBUTE = re.compile(
    r"^(?:(?P<domain>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]{0,31})$"
)
_INT = re.compile(r"^[-+]?\d{1,18}$")


class NamespacedFilterSet(django_filters.FilterSet):
    """`namespace`, `name` (exact) and `q` (name contains) on every namespaced object."""

    namespace = django_filters.CharFilter()
    name = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")


class DeviceClassMixin(django_filters.FilterSet):
    """`class=<DeviceClass>`: objects whose requests name that class."""

    device_class = DNSSubdomainFilter(method="filter_class", label="DeviceClass")

    def filter_class(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        if not value:
            return qs
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


class MultipleTextInput(forms.TextInput):
    """A text box whose parameter may repeat: `?attribute=a=1&attribute=b=2`."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        getlist = getattr(data, "getlist", None)
        return getlist(name) if getlist else data.get(name)

    def format_value(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return value[0] if value else None
        return super().format_value(value)


class AttributeField(forms.Field):
    """Parses `[domain/]name=value` equality terms into (domain, name, value) triples."""

    widget = MultipleTextInput

    def to_python(self, value: Any) -> list[tuple[str, str, str]]:
        if value in (None, "", []):
            return []
        terms = value if isinstance(value, (list, tuple)) else [value]
        parsed: list[tuple[str, str, str]] = []
        for term in terms:
            key, sep, wanted = str(term).partition("=")
            match = _ATTRIBUTE.match(key.strip())
            if not sep or match is None:
                raise forms.ValidationError(
                    "expected [domain/]name=value (e.g. gpu.example.com/model=h100), got %(term)r",
                    params={"term": term},
                )
            parsed.append((match.group("domain") or "", match.group("name"), wanted))
        return parsed


class AttributeMatch:
    """Builds `attributes[key] == value` conditions over aliases, on SQLite and PostgreSQL.

    The key is passed as an expression rather than a `attributes__<key>` keyword, so attribute
    names that contain `__` or spell a lookup name ("contains", "regex") stay plain keys.
    """

    def __init__(self) -> None:
        self.aliases: dict[str, KeyTransform] = {}

    def _alias(self, key: str, value_type: str) -> str:
        alias = f"_attribute_{len(self.aliases)}"
        self.aliases[alias] = KeyTransform(value_type, KeyTransform(key, "attributes"))
        return alias

    def equals(self, key: str, wanted: str) -> Q:
        """attributes[key] equals `wanted` in any v1 value type the text can be."""
        condition = Q(**{self._alias(key, "string"): wanted})
        condition |= Q(**{self._alias(key, "version"): wanted})
        if _INT.match(wanted):
            condition |= Q(**{self._alias(key, "int"): int(wanted)})
        if wanted.lower() in ("true", "false"):
            condition |= Q(**{self._alias(key, "bool"): wanted.lower() == "true"})
        return condition


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class AttributeFilter(django_filters.Filter):
    """Device attribute equality; an unqualified name also matches in the device's driver domain.

    `gpu.example.com/model=h100` matches the attribute stored as `gpu.example.com/model`, or as
    `model` on devices of driver gpu.example.com; `model=h100` matches `model`, or
    `<driver>/model` on each device's own driver. Several terms must all hold.
    """

    field_class = AttributeField

    def filter(self, qs: QuerySet[Any], value: list[tuple[str, str, str]]) -> QuerySet[Any]:
        if not value:
            return qs
        drivers: list[str] | None = None
        match = AttributeMatch()
        conditions: list[Q] = []
        for domain, name, wanted in value:
            if domain:
                condition = match.equals(f"{domain}/{name}", wanted) | (
                    Q(driver=domain) & match.equals(name, wanted)
                )
            else:
                if drivers is None:
                    # One query for the drivers present, whatever the number of terms.
                    drivers = sorted(
                        Device.objects.order_by().values_list("driver", flat=True).distinct()
                    )
                condition = match.equals(name, wanted)
                for driver in drivers:
                    condition |= Q(driver=driver) & match.equals(f"{driver}/{name}", wanted)
            conditions.append(condition)
        qs = qs.alias(**match.aliases)
        for condition in conditions:
            qs = qs.filter(condition)
        return qs


class DeviceFilterSet(django_filters.FilterSet):
    """Devices by driver, pool, node, class (its CEL selectors), state and attributes.

    `state` needs the columns of `claims.devices.states.annotate_device_state` on the queryset.
    free, allocated, shared, admin and tainted match that SQL `state` column; blocked and
    unhealthy match the refined flags of `refine_device_states` (the list's `blocked` and
    `unhealthy`), found in a fixed number of queries. A blocked device is also `state=free`, an
    unhealthy one keeps its SQL state too, as in the counts.
    """

    name = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter(field_name="pool_name")
    node = django_filters.CharFilter(field_name="node_name")
    current = BooleanFilter()
    tainted = BooleanFilter(field_name="is_tainted")
    state = django_filters.MultipleChoiceFilter(choices=DeviceState.choices, method="filter_state")
    attribute = AttributeFilter(label="Attribute equals ([domain/]name=value)")
    device_class = django_filters.CharFilter(
        method="filter_class", label="DeviceClass (devices its selectors select)"
    )
    namespace = django_filters.CharFilter(
        method="filter_namespace", label="Allocated to a claim in namespace"
    )

    class Meta:
        model = Device
        fields = ["name", "driver", "pool", "node", "current", "tainted", "state", "attribute"]

    def filter_state(self, qs: QuerySet[Any], name: str, value: list[str]) -> QuerySet[Any]:
        if not value:
            return qs
        wanted = set(value)
        refined = {DeviceState.BLOCKED, DeviceState.UNHEALTHY}
        condition = Q(state__in=sorted(wanted - refined))
        if DeviceState.BLOCKED in wanted:
            condition |= Q(pk__in=blocked_device_ids(qs))
        if DeviceState.UNHEALTHY in wanted:
            condition |= Q(pk__in=unhealthy_device_ids(qs))
        return qs.filter(condition)

    def filter_namespace(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        if not value:
            return qs

        held = AllocatedDevice.objects.filter(
            claim__namespace=value,
            driver=OuterRef("driver"),
            pool=OuterRef("pool_name"),
            device=OuterRef("name"),
        )
        return qs.filter(Exists(held))

    @property
    def qs(self) -> QuerySet[Any]:
        if not hasattr(self, "_qs") and "state" not in self.queryset.query.annotations:
            self.queryset = annotate_device_state(self.queryset)
        return super().qs

    def filter_class(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        """Devices the DeviceClass selects, by all its CEL selectors: the membership that
        availability counts (`class_membership`), so the list and the counts agree."""
        if not value:
            return qs
        membership = class_membership()
        members = membership.members.get(value)
        if members is None:
            exists = DeviceClass.objects.filter(name=value).exists()
            message = (
                "DeviceClass %(value)r does not compile: %(error)s"
                if exists
                else "DeviceClass %(value)r does not exist"
            )
            raise forms.ValidationError(
                {
                    "class": forms.ValidationError(
                        message,
                        params={"value": value, "error": membership.errors.get(value, "")},
                    )
                }
            )
        return qs.filter(pk__in=ids_in(members))


# `class` is a Python keyword: expose the parameter under its Kubernetes word.
DeviceFilterSet.base_filters["class"] = DeviceFilterSet.base_filters.pop("device_class")


class IntegerFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


class FreeUnitsFilterSet(django_filters.FilterSet):
    """`class=<DeviceClass>` and `free_min=<n>` over rows that hold physical units (nodes,
    pools): every row gets `units_total` and `units_free`, the units of that class it holds
    (`claims.devices.availability`), so lists filter and sort by them in SQL. Without a class,
    pools count every unit; nodes, which hold units of many kinds, need the class."""

    device_class = DNSSubdomainFilter(method="filter_units_class", label="DeviceClass")
    free_min = IntegerFilter(
        field_name="units_free", lookup_expr="gte", min_value=0, label="At least this many free"
    )
    units_by: Grouping = "pool"
    units_field = "pk"
    needs_class = False

    def filter_units_class(self, qs: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return qs  # the class chooses the units counted: applied in `filter_queryset`

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        device_class = self.form.cleaned_data.get("class") or ""
        if device_class or not self.needs_class:
            try:
                counts = unit_counts(self.units_by, device_class=device_class)
            except LookupError as exc:
                raise forms.ValidationError({"class": forms.ValidationError(str(exc))}) from exc
            queryset = annotate_units(queryset, counts, field=self.units_field)
        elif self.form.cleaned_data.get("free_min") is not None:
            raise forms.ValidationError(
                {"free_min": forms.ValidationError("free units of which class? add class=")}
            )
        return super().filter_queryset(queryset)


class NodeUnitsFilterSet(NodeFilterSet, FreeUnitsFilterSet):
    """Nodes, and the free units of a DeviceClass local to each (`?class=gpu-h100&free_min=8`)."""

    units_by: Grouping = "node"
    units_field = "name"
    needs_class = True

    class Meta(NodeFilterSet.Meta):
        fields = [*NodeFilterSet.Meta.fields, "free_min"]


class PoolUnitsFilterSet(PoolFilterSet, FreeUnitsFilterSet):
    """Pools, and their free units: of a DeviceClass, or every unit without one."""

    class Meta(PoolFilterSet.Meta):
        fields = [*PoolFilterSet.Meta.fields, "free_min"]


_rename_class(NodeUnitsFilterSet)
_rename_class(PoolUnitsFilterSet)
