"""Choice sets for the claims app."""

from django.db import models


class ClaimState(models.TextChoices):
    """Where a ResourceClaim is in its life, as `kubectl describe` would tell it."""

    PENDING = "pending", "Pending"
    ALLOCATED = "allocated", "Allocated"
    RESERVED = "reserved", "Reserved"
    DEALLOCATION_REQUESTED = "deallocation-requested", "Deallocation requested"


class DeviceState(models.TextChoices):
    """How a device is held right now, as the pool grid colours it.

    The first five are SQL columns (`claims.devices.states.annotate_device_state`); blocked (free,
    but its pool's shared counters left cannot cover it) and unhealthy (NoExecute taint or a
    Ready=False device condition) need Python and come from `refine_device_states`.
    """

    FREE = "free"
    ALLOCATED = "allocated"
    SHARED = "shared"
    ADMIN = "admin"
    TAINTED = "tainted"
    BLOCKED = "blocked"
    UNHEALTHY = "unhealthy"
