"""Cursor pagination for every list endpoint (stable under concurrent sync writes)."""

from rest_framework.pagination import CursorPagination


class Cursor(CursorPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
    ordering = "pk"
