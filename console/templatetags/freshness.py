"""The header badge's and banner's data: the cluster's freshness (`inventory.freshness`)."""

from __future__ import annotations

import logging

from django import template

from inventory.freshness import Freshness, cluster_freshness

register = template.Library()
log = logging.getLogger(__name__)


@register.simple_tag
def freshness_now() -> Freshness | None:
    """The freshness now, or None when it cannot be read (an error page, the database down)."""
    try:
        return cluster_freshness()
    except Exception:  # noqa: BLE001 - a page must render even when the sync state cannot be read
        log.warning("the freshness of the cluster could not be read", exc_info=True)
        return None
