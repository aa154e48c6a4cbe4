"""API permissions: read for signed-in users (or everyone with DASHBOARD_PUBLIC_READ)."""

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission


class ReadOnlyViewer(BasePermission):
    """Cluster objects are read-only here; reading needs a user unless public read is on."""

    def has_permission(self, request, view) -> bool:
        if request.method not in SAFE_METHODS and not getattr(view, "allow_post", False):
            return False
        if settings.PUBLIC_READ and request.method in SAFE_METHODS:
            return True
        return bool(request.user and request.user.is_authenticated)
