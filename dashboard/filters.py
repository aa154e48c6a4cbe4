"""Filter building blocks every app's FilterSets use: strict booleans, JSON list and text lookups,
DNS names and device attribute equality.

Every parameter is a plain GET value and every wrong value is a form error, which the API turns
into a 400 naming the parameter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import django_filters
from django import forms
from django.db import connection
from django.db.models import Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

# DNS subdomain (driver, class and pool names may be longer paths; this is for class names).
# Messages that quote what a user sent pass it as a parameter: django-filter %-formats every
# message, so a literal "%" in one would fail the request.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class StrictBooleanField(forms.Field):
    """`true`/`false` (also 1/0, yes/no); anything else is an error instead of being ignored."""

    _values = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        try:
            return self._values[str(value).strip().lower()]
        except KeyError:
            raise forms.ValidationError(
                "expected true or false, got %(value)r", params={"value": value}
            ) from None


@extend_schema_field(OpenApiTypes.BOOL)
class BooleanFilter(django_filters.Filter):
    """A boolean parameter that rejects values other than true/false."""

    field_class = StrictBooleanField


def json_list_contains(field: str, item: str) -> Q:
    """Rows whose JSON list `field` contains the string `item`, on SQLite and PostgreSQL."""
    if connection.features.supports_json_field_contains:
        return Q(**{f"{field}__contains": [item]})
    # SQLite has no JSON containment: match the quoted item in the stored JSON text. Callers
    # validate `item` (DNS names), so it holds no quote or LIKE wildcard to escape.
    return Q(**{f"_text_{field}__contains": f'"{item}"'})


def with_json_text(qs: QuerySet[Any], field: str) -> QuerySet[Any]:
    """Alias the JSON text of `field` for `json_list_contains` on backends without containment."""
    if connection.features.supports_json_field_contains:
        return qs
    return qs.alias(**{f"_text_{field}": Cast(field, TextField())})


class DNSSubdomainField(forms.CharField):
    """A Kubernetes object name (DNS subdomain); anything else is a form error, not a 500."""

    def clean(self, value: Any) -> str:
        text = super().clean(value)
        if text and (len(text) > 253 or not _DNS_SUBDOMAIN.match(text)):
            raise forms.ValidationError(
                "must be a DNS subdomain, got %(value)r", params={"value": text}
            )
        return text


class DNSSubdomainFilter(django_filters.CharFilter):
    """A parameter that names a Kubernetes object, validated before any query runs."""

    field_class = DNSSubdomainField


def ids_in(ids: Iterable[int]) -> RawSQL:
    """A subquery of `ids` for `pk__in=`, sent as one JSON parameter whatever their number: an
    IN list of every GPU of a large cluster passes SQLite's 32,766 parameters."""
    values = json.dumps(sorted(int(i) for i in ids))
    if connection.vendor == "postgresql":
        return RawSQL("SELECT (jsonb_array_elements_text(%s::jsonb))::bigint", (values,))
    return RawSQL("SELECT value FROM json_each(%s)", (values,))
