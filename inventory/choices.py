"""Choice sets for the inventory app, named as Kubernetes names them."""

from django.db import models

from dralib.kube import kinds

# The cluster every row synced before clusters existed belongs to, and that a single-cluster
# installation keeps working in (its leases keep their old names).
DEFAULT_CLUSTER = "default"

# The library's enum as Django choices, for model fields: one list of kinds in the whole tree.
Kind = models.TextChoices("Kind", [(kind.name, kind.value) for kind in kinds.Kind])


class TaintEffect(models.TextChoices):
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"
    NONE = "None"
