"""Claims models: who asks for devices (claims, templates, pods), what they hold, quota, and the
history of how many devices were held (the cluster keeps no such history for us)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from claims.choices import ClaimState
from inventory.models import KubeObject, Scoped


class NamespacedObject(KubeObject):
    """A namespaced Kubernetes object; names are unique within a namespace."""

    namespace = models.CharField(max_length=253)

    class Meta:
        abstract = True


class ResourceClaim(NamespacedObject):
    """A resource.k8s.io ResourceClaim: a request for devices, and its allocation once made.

    Classic (v1alpha2) claims are allocated by their driver, not by the scheduler; they are
    kept and shown but flagged so that what-if does not pretend to simulate them.
    """

    state = models.CharField(max_length=32, choices=ClaimState.choices)
    classic = models.BooleanField(default=False)
    node_name = models.CharField(
        max_length=253,
        blank=True,
        default="",
        help_text="The node the allocation is bound to, when its nodeSelector names one node.",
    )
    device_classes = models.JSONField(default=list, blank=True)
    request_count = models.PositiveIntegerField(default=0)
    allocated_count = models.PositiveIntegerField(default=0)
    template_name = models.CharField(max_length=253, blank=True, default="")
    owner_pod = models.CharField(max_length=253, blank=True, default="")
    diagnosis = models.JSONField(
        null=True, blank=True, help_text="Why a pending claim does not fit (kept current)."
    )
    diagnosed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="claim_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="claim_ns_name_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "state"], name="claim_state_idx"),
            models.Index(fields=["cluster", "node_name"], name="claim_node_idx"),
            # What-if's fingerprint reads the latest write per table (claims.whatif.listing).
            models.Index(fields=["cluster", "synced_at"], name="claim_synced_idx"),
            # What-if lists the allocated claims' versions after every change: from this index
            # alone, without reading the rows' objects (3x faster at 20,000 claims).
            models.Index(
                fields=["cluster", "namespace", "name", "uid", "resource_version", "synced_at"],
                condition=models.Q(allocated_count__gt=0),
                name="claim_alloc_versions_idx",
            ),
            # Written pods re-link the claims they own (claims.templates): without it every
            # batch of pods scanned the namespaces' claims (25 vs 2 ms per 500 pods at 20,000
            # claims, a twentieth of a 5,000-node import).
            models.Index(fields=["cluster", "owner_pod"], name="claim_owner_pod_idx"),
        ]

    def clean(self) -> None:
        if self.state == ClaimState.PENDING and self.allocated_count:
            raise ValidationError("a pending claim holds no devices")


class ResourceClaimTemplate(NamespacedObject):
    """A ResourceClaimTemplate: the spec pods use to get a claim of their own."""

    device_classes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="template_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="template_ns_name_unique"
            ),
        ]


class AllocatedDevice(Scoped):
    """One entry of a claim's status.allocation.devices.results, with its device status."""

    claim = models.ForeignKey(
        ResourceClaim, on_delete=models.CASCADE, related_name="allocated_devices"
    )
    request = models.CharField(max_length=253, help_text="`req` or `req/subreq`.")
    driver = models.CharField(max_length=253)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=253)
    share_id = models.CharField(max_length=64, blank=True, default="")
    consumed_capacity = models.JSONField(default=dict, blank=True)
    admin_access = models.BooleanField(default=False)
    tolerations = models.JSONField(default=list, blank=True)
    binding_conditions = models.JSONField(default=list, blank=True)
    binding_failure_conditions = models.JSONField(default=list, blank=True)
    conditions = models.JSONField(default=list, blank=True)
    network_data = models.JSONField(null=True, blank=True)
    data = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["claim_id", "id"]
        indexes = [
            models.Index(fields=["cluster", "driver", "pool", "device"], name="alloc_device_idx")
        ]

    def __str__(self) -> str:
        return f"{self.claim}: {self.request} -> {self.key}"

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class Reservation(Scoped):
    """One entry of a claim's status.reservedFor: a consumer (usually a pod) using the claim."""

    claim = models.ForeignKey(ResourceClaim, on_delete=models.CASCADE, related_name="reservations")
    api_group = models.CharField(max_length=253, blank=True, default="")
    resource = models.CharField(max_length=253, default="pods")
    name = models.CharField(max_length=253)
    consumer_uid = models.CharField(max_length=64)

    class Meta:
        ordering = ["claim_id", "name"]

    def __str__(self) -> str:
        return f"{self.resource}/{self.name}"


class Pod(NamespacedObject):
    """A core/v1 Pod: every pod as a slim projection, the whole object for pods with claims.

    Every pod keeps what the scheduler's node accounting reads: its node, phase, priority, the
    requests its node must hold (`claims.whatif.resources.pod_requests` in the scheduler's
    units), its host ports, labels and required anti-affinity terms. Only a pod that uses
    ResourceClaims (or an extended resource a DeviceClass backs) also keeps its object (`raw`,
    `obj`, redacted) and its claim columns; the others keep `{}` there (`uses_claims` is False).
    """

    phase = models.CharField(max_length=32, blank=True, default="")
    node_name = models.CharField(max_length=253, blank=True, default="")
    uses_claims = models.BooleanField(
        default=False, help_text="The whole object is kept (the pod uses claims)."
    )
    priority = models.IntegerField(default=0, help_text="spec.priority")
    cpu_request = models.BigIntegerField(default=0, help_text="Requested cpu, millicores.")
    memory_request = models.BigIntegerField(default=0, help_text="Requested memory, bytes.")
    storage_request = models.BigIntegerField(
        default=0, help_text="Requested ephemeral-storage, bytes."
    )
    other_requests = models.JSONField(
        default=dict, blank=True, help_text="Other scalar requests (hugepages-*, extended)."
    )
    host_ports = models.JSONField(
        default=list, blank=True, help_text="[hostIP, protocol, hostPort] of each host port."
    )
    anti_affinity = models.JSONField(
        default=list,
        blank=True,
        help_text="Required pod anti-affinity terms (InterPodAffinity checks running pods').",
    )
    resource_claims = models.JSONField(default=list, blank=True)
    container_claims = models.JSONField(default=dict, blank=True)
    claim_statuses = models.JSONField(default=list, blank=True)
    resource_health = models.JSONField(
        default=list,
        blank=True,
        help_text="DRA entries of status.containerStatuses[].allocatedResourcesStatus, flattened.",
    )

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="pod_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="pod_ns_name_unique"
            ),
        ]
        indexes = [
            # Also finds the unbound pods that use claims (node_name "", then uses_claims):
            # they are few, and an index of its own on uses_claims cost every pod write more.
            models.Index(fields=["cluster", "node_name"], name="pod_node_idx"),
            # What-if's fingerprint reads the latest write per table (claims.whatif.listing).
            models.Index(fields=["cluster", "synced_at"], name="pod_synced_idx"),
        ]


class ResourceQuota(NamespacedObject):
    """A core/v1 ResourceQuota, with DRA device-class limits among its `hard` and `used`."""

    hard = models.JSONField(default=dict, blank=True)
    used = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="quota_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="quota_ns_name_unique"
            ),
        ]


class LimitRange(NamespacedObject):
    """A core/v1 LimitRange: the defaults and bounds the API server applies to new pods."""

    limits = models.JSONField(default=list, blank=True, help_text="spec.limits")

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="limitrange_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="limitrange_ns_name_unique"
            ),
        ]


class PriorityClass(KubeObject):
    """A scheduling.k8s.io/v1 PriorityClass: the priority admission gives pods that name it (or
    every pod without one, when it is the global default), and whether they may preempt."""

    value = models.IntegerField(default=0)
    global_default = models.BooleanField(default=False)
    preemption_policy = models.CharField(
        max_length=32, blank=True, default="", help_text="PreemptLowerPriority or Never."
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="priorityclass_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="priorityclass_name_unique"),
        ]


class PodDisruptionBudget(NamespacedObject):
    """A policy/v1 PodDisruptionBudget: how many of the pods it selects may be evicted now
    (`status.disruptionsAllowed`), which preemption tries not to exceed."""

    selector = models.JSONField(
        null=True, blank=True, help_text="spec.selector (null or empty: selects no pod)."
    )
    min_available = models.CharField(max_length=16, blank=True, default="")
    max_unavailable = models.CharField(max_length=16, blank=True, default="")
    disruptions_allowed = models.IntegerField(default=0)
    disrupted_pods = models.JSONField(
        default=list, blank=True, help_text="Names in status.disruptedPods (already processed)."
    )

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="pdb_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="pdb_ns_name_unique"
            ),
        ]


class Event(NamespacedObject):
    """An events.k8s.io/v1 Event about a ResourceClaim or a pod that uses claims (the scheduler's
    FailedScheduling and Scheduled, a driver's warnings).

    Kept bounded (`claims.events`): the newest `EVENTS_PER_OBJECT` per object they are about,
    none last seen longer ago than `EVENTS_TTL_SECONDS`. The `regarding_*` columns name that
    object; `count` and the times fold the event's series (or its deprecated count) in.
    """

    event_type = models.CharField(max_length=32, blank=True, default="", help_text="type")
    reason = models.CharField(max_length=128, blank=True, default="")
    note = models.TextField(blank=True, default="")
    action = models.CharField(max_length=128, blank=True, default="")
    reporting_controller = models.CharField(max_length=253, blank=True, default="")
    reporting_instance = models.CharField(max_length=253, blank=True, default="")
    regarding_kind = models.CharField(max_length=64, blank=True, default="")
    regarding_name = models.CharField(max_length=253, blank=True, default="")
    regarding_uid = models.CharField(max_length=64, blank=True, default="")
    count = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField(null=True, blank=True)
    # Not indexed, nor are count, raw and the other columns a series bump rewrites: most event
    # traffic is such bumps, and PostgreSQL rewrites every index of a row for an update that
    # changes an indexed column (no HOT update). Readers sort an object's few events in memory,
    # and the TTL sweep reads the table now and then (`claims.events`).
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["namespace", "-last_seen"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="event_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="event_ns_name_unique"
            ),
        ]
        indexes = [
            models.Index(
                fields=["cluster", "namespace", "regarding_kind", "regarding_name"],
                name="event_regarding_idx",
            ),
        ]


class PodSchedulingContext(NamespacedObject):
    """A classic (v1alpha2) PodSchedulingContext: the scheduler's node negotiation with drivers."""

    selected_node = models.CharField(max_length=253, blank=True, default="")
    potential_nodes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="psc_uid_unique"),
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="psc_ns_name_unique"
            ),
        ]


class UtilisationSample(Scoped):
    """How many current devices of one driver were allocated, shared, tainted at one moment.

    Not a Kubernetes object: a time series the cluster does not remember for us. One row per
    driver per sample (`claims.devices.history.take_sample`); the overview draws allocated /
    total over time from them.
    """

    taken_at = models.DateTimeField(db_index=True)
    driver = models.CharField(max_length=253)
    total = models.PositiveIntegerField(default=0)
    allocated = models.PositiveIntegerField(
        default=0, help_text="Devices held by at least one claim (exclusive, shared or admin)."
    )
    tainted = models.PositiveIntegerField(default=0)
    unhealthy = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["taken_at", "driver"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "taken_at", "driver"],
                name="utilisation_sample_time_driver_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.driver}@{self.taken_at:%Y-%m-%d %H:%M}: {self.allocated}/{self.total}"

    @property
    def fraction(self) -> float:
        return self.allocated / self.total if self.total else 0.0


class SharedWhatIf(Scoped):
    """A what-if answer kept as it was computed, behind a share link.

    Not a Kubernetes object. The token is the link's only name (unguessable: 32 random bytes);
    the submitter and the namespaces the question touched are kept so that the link shows the
    answer only to a person who may see them (`claims.whatif.shared.may_see`). Rows expire and
    each submitter keeps a bounded number; the answer is cut to a bounded size before it is kept.
    """

    token = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField()
    expires = models.DateTimeField(db_index=True)
    submitter = models.CharField(max_length=150, db_index=True)
    namespaces = models.JSONField(default=list, blank=True)
    values = models.JSONField(default=dict, help_text="The form's fields, to run it again.")
    source = models.CharField(max_length=300, blank=True, default="")
    answer = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"what-if shared by {self.submitter or '(anonymous)'} at {self.created:%Y-%m-%d}"


class KeptMembership(Scoped):
    """The DeviceClass membership's CEL outcomes as last computed, kept across restarts.

    Not a Kubernetes object. Evaluating every class's selectors over every device is most of a
    web process's start-up work; a new process reads these outcomes and evaluates again only
    the devices of slices written since (`claims.devices.stored`). `classes` is a digest of
    every class's name and selectors (and of how outcomes are decided): outcomes stored under
    another digest are not used. One row per kept value (`name`): the physical units
    (`claims.devices.units`) are kept the same way, under a digest of the slices' versions.
    """

    name = models.CharField(max_length=63)
    classes = models.CharField(max_length=64)
    stored_at = models.DateTimeField()
    devices = models.PositiveIntegerField(default=0)
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="kept_membership_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.devices} devices at {self.stored_at:%Y-%m-%d %H:%M:%S}"
