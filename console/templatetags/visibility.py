"""The banner that says why namespaced objects are missing: visibility could not be asked."""

from __future__ import annotations

from typing import Any

from django import template

from inventory.visibility import visibility_for

register = template.Library()


@register.simple_tag(takes_context=True)
def visibility_problem(context: dict[str, Any]) -> str:
    """Why this person sees no namespace at all right now, or "" when nothing is wrong."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return ""
    seen = visibility_for(request)
    if not seen.error:
        return ""
    return (
        "Claims, pods and other namespaced objects are hidden: the cluster could not be asked "
        f"which namespaces you may see ({seen.error}). Capacity is still shown."
    )
