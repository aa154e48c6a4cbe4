"""Choice sets for the inventory app, named as Kubernetes names them."""

from django.db import models


class Kind(models.TextChoices):
    """Every kind the dashboard syncs, spelled as the API server spells it."""

    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    DEVICE_TAINT_RULE = "DeviceTaintRule"
    NODE = "Node"
    POD = "Pod"
    RESOURCE_QUOTA = "ResourceQuota"
    RESOURCE_CLASS = "ResourceClass"
    POD_SCHEDULING_CONTEXT = "PodSchedulingContext"
    NAMESPACE = "Namespace"


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
