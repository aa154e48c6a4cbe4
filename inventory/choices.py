"""Choice sets for the inventory app, named as Kubernetes names them."""

from django.db import models

from dralib.kube import kinds

# The library's enum as Django choices, for model fields: one list of kinds in the whole tree.
Kind = models.TextChoices("Kind", [(kind.name, kind.value) for kind in kinds.Kind])


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


class TaintEffect(models.TextChoices):
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"
    NONE = "None"
