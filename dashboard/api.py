"""Shared API pieces: the read-only viewset base, strict ordering, raw-object serializer, errors.

Every endpoint is a few attributes on `ReadOnlyViewSet` (NetBox style). Wrong input never reaches
the database as a 500: unknown ordering fields, bad filter values, bad cursors all become a 400
that names the parameter.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django validation and value errors from bad input as 400s.

    Parsers of user input raise ValueError (NormalizeError, QuantityError, int("x")...), so it
    means bad input; it is still logged with its traceback, in case a bug raised it. KeyError and
    TypeError are bugs, never the client's fault: they stay 500s.
    """
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, DjangoValidationError):
        body = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ValueError):
        log.warning("bad request input: %s", exc, exc_info=True)
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    return None


def wants_yaml(request: Request | None) -> bool:
    """True when the request negotiated the Kubernetes YAML renderer (`?format=yaml`)."""
    renderer = getattr(request, "accepted_renderer", None)
    return getattr(renderer, "format", None) == "yaml"


class StrictOrderingFilter(OrderingFilter):
    """`?ordering=a,-b` over the view's `ordering_fields`; an unknown field is a 400, not ignored.

    The primary key is appended as a tie-breaker so that cursor pages are deterministic.
    """

    def get_ordering(self, request: Request, queryset: QuerySet[Any], view: Any) -> list[str]:
        params = request.query_params.get(self.ordering_param)
        if params is None:
            ordering = list(self.get_default_ordering(view) or ["pk"])
        else:
            terms = [term.strip() for term in params.split(",")]
            valid = [
                name for name, _ in self.get_valid_fields(queryset, view, {"request": request})
            ]
            bad = [term for term in terms if term.removeprefix("-") not in valid]
            if not terms or bad:
                raise ValidationError(
                    {
                        self.ordering_param: [
                            f"unknown ordering field {', '.join(map(repr, bad)) or repr('')}; "
                            f"choose from {', '.join(valid)}"
                        ]
                    }
                )
            ordering = terms
        if not any(term.removeprefix("-") in {"pk", "id"} for term in ordering):
            ordering.append("-pk" if ordering[0].startswith("-") else "pk")
        return ordering


class RawObjectSerializer(serializers.BaseSerializer):
    """The object as the API server sent it (what `?format=yaml` renders)."""

    def to_representation(self, instance: Model) -> Any:
        return getattr(instance, self.context.get("raw_field", "raw"))


class ReadOnlyViewSet(viewsets.ReadOnlyModelViewSet):
    """List and retrieve one model: filters, strict ordering, cursor pages and raw YAML.

    Subclasses set `queryset`, `serializer_class` (list), `detail_serializer_class`,
    `filterset_class` and `ordering_fields`; `raw_field` names the column `?format=yaml` renders
    (None renders the serializer's output), and `list_defer` keeps large JSON out of list queries.
    """

    detail_serializer_class: ClassVar[type[serializers.BaseSerializer] | None] = None
    raw_field: ClassVar[str | None] = "raw"
    list_defer: ClassVar[Sequence[str]] = ("raw", "obj")
    filter_backends = [DjangoFilterBackend, StrictOrderingFilter]
    ordering: ClassVar[Sequence[str]] = ("pk",)
    ordering_fields: ClassVar[Iterable[str]] = ("pk",)

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()
        if self.action == "list" and self.list_defer:
            keep = {self.raw_field} if wants_yaml(self.request) else set()
            deferred = [name for name in self.list_defer if name not in keep]
            if deferred:
                queryset = queryset.defer(*deferred)
        return queryset

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.raw_field and wants_yaml(getattr(self, "request", None)):
            return RawObjectSerializer
        if self.action == "retrieve" and self.detail_serializer_class is not None:
            return self.detail_serializer_class
        return super().get_serializer_class()

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        context["raw_field"] = self.raw_field or "raw"
        return context
