"""API permissions: read-only, for any signed-in user (or everyone with DASHBOARD_PUBLIC_READ).

Decision: reading needs an active, signed-in user; what they read is narrowed elsewhere, per
namespace, by what their Kubernetes identity may list (SubjectAccessReviews, applied by every
namespaced list, detail and answer), so no dashboard-side role is needed: Kubernetes RBAC is the
one source of who sees which namespace. Cluster-scoped capacity is shown to every reader. Writes
are refused to everyone except on views that opt in with `allow_post = True` (the what-if
endpoint, which changes nothing).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request


class ReadOnlyViewer(BasePermission):
    """Cluster objects are read-only here; reading needs a user unless public read is on."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method not in SAFE_METHODS and not (
            request.method == "POST" and getattr(view, "allow_post", False)
        ):
            return False
        if settings.PUBLIC_READ and request.method in SAFE_METHODS:
            return True
        user = request.user
        return bool(user and user.is_authenticated and user.is_active)
