"""Cursor pagination for every list endpoint (stable under concurrent sync writes).

Bad input is a 400, never a silent default: a `limit` that is not a positive integer and a cursor
that does not decode (or whose position does not fit the ordering field) are rejected by name.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, QuerySet
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request


class Cursor(CursorPagination):
    """Opaque cursors over a stable ordering; `?limit=` sets the page size (at most 1000)."""

    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
    ordering = "pk"
    # The offset walks runs of equal values in the first ordering field (`?ordering=driver`
    # over thousands of devices of one driver); DRF's default cap of 1000 would repeat pages.
    offset_cutoff = 1_000_000

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any] | None:
        self._model: type[Model] = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def get_page_size(self, request: Request) -> int:
        text = request.query_params.get(self.page_size_query_param or "limit")
        if text is None:
            return self.page_size
        try:
            size = int(text)
        except ValueError:
            raise ValidationError(
                {"limit": [f"must be a positive integer, got {text!r}"]}
            ) from None
        if size < 1:
            raise ValidationError({"limit": [f"must be a positive integer, got {text!r}"]})
        # Above the maximum the page is clamped, as DRF documents, rather than refused.
        return min(size, self.max_page_size)

    def decode_cursor(self, request: Request) -> Any:
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": ["invalid cursor"]}) from None
        if cursor is None or cursor.position is None:
            return cursor
        # A forged position must fail here, not as a database error when the page is read.
        name = self.ordering[0].lstrip("-")
        meta = self._model._meta
        try:
            field = meta.pk if name == "pk" else meta.get_field(name)
        except FieldDoesNotExist:
            return cursor  # an annotation: compared as text by the database
        try:
            field.to_python(cursor.position)
        except (DjangoValidationError, ValueError, TypeError):
            raise ValidationError({"cursor": ["invalid cursor position"]}) from None
        return cursor
