"""Choice sets for the claims app."""

from django.db import models


class ClaimState(models.TextChoices):
    """Where a ResourceClaim is in its life, as `kubectl describe` would tell it."""

    PENDING = "pending", "Pending"
    ALLOCATED = "allocated", "Allocated"
    RESERVED = "reserved", "Reserved"
    DEALLOCATION_REQUESTED = "deallocation-requested", "Deallocation requested"
