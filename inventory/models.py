"""Inventory models: what the cluster offers (nodes, classes, slices, pools, devices, counters).

Every synced object keeps the JSON the API server sent (`raw`) and its normalized v1 form (`obj`)
beside the columns we index and query, so no field the cluster sent is lost.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from dashboard import scope
from inventory.choices import Kind

# `device.driver == "x"`: the one selector shape that names a driver without running CEL.
_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"\\]+)"\s*$')


class Cluster(models.Model):
    """A Kubernetes cluster whose objects the dashboard keeps: every synced row belongs to one.

    Named by the operator (a slug, used in URLs and metric labels); identified by the uid of
    its kube-system namespace once the sync has seen it. Removing a cluster removes its rows.
    """

    name = models.SlugField(max_length=63, help_text="The operator's name for it, in URLs.")
    uid = models.CharField(
        max_length=64, blank=True, default="", help_text="The uid of its kube-system namespace."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["name"], name="cluster_name_unique")]

    def __str__(self) -> str:
        return self.name


class InScope(models.Expression):
    """The cluster in scope, read when the query is compiled, not when it is built: a queryset
    made at import time (a viewset's `queryset`) reads the scope of each request."""

    output_field = models.BigIntegerField()

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[int]]:
        return "%s", [scope.current()]


class ScopedManager(models.Manager["models.Model"]):
    """Rows of the cluster in scope (`dashboard.scope`); outside a scope, raises ScopeUnset."""

    def get_queryset(self) -> models.QuerySet[Any]:
        return super().get_queryset().filter(cluster_id=InScope())


class Scoped(models.Model):
    """A row of one cluster: written with the cluster in scope, read only inside that scope.

    A new row takes the cluster in scope; outside a scope it has none, and saving it fails on
    the column's NOT NULL (unsaved rows made for computations need no scope).
    `objects` is the scoped manager (the default one: admin, serializers and related lookups
    use it); `all_clusters` reads across clusters, for what spans the fleet (removing a
    cluster, expiry sweeps). Every constraint and index of a scoped model leads with `cluster`
    (a cluster's rows are one range of each index; SQLite is told what that means for its plans
    by `inventory.planner`), but those of rows found through a parent row of one cluster (a
    slice's devices and counter sets).
    """

    cluster = models.ForeignKey(
        Cluster,
        on_delete=models.CASCADE,
        default=scope.get,
        related_name="+",
        # Each constraint and index leads with the cluster: one more would only cost writes.
        db_index=False,
    )

    objects = ScopedManager()
    all_clusters = models.Manager()

    class Meta:
        abstract = True


class KubeObject(Scoped):
    """Columns every synced Kubernetes object has.

    Each model declares its own indexes in Meta, never with `unique=True`/`db_index=True` on a
    text column: on PostgreSQL those also build a `varchar_pattern_ops` twin for LIKE 'x%',
    which no query here uses, and every written row enters every index (issue #25: 12 indexes
    on pods, 7 of them twins or covered, made a pod copy 1.5x slower). The uid is unique per
    model (a `<model>_uid_unique` constraint); cluster-scoped names by `<model>_name_unique`,
    namespaced ones by (namespace, name), whose index also serves lookups by namespace alone.
    """

    uid = models.CharField(max_length=64)
    name = models.CharField(max_length=253)
    api_version = models.CharField(
        max_length=64, help_text="The apiVersion the server sent the object in."
    )
    resource_version = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    raw = models.JSONField(help_text="The object exactly as the API server sent it.")
    obj = models.JSONField(help_text="The object normalized to the internal v1 shape.")
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        namespace = getattr(self, "namespace", "")
        return f"{namespace}/{self.name}" if namespace else self.name


class Node(KubeObject):
    """A core/v1 Node: where node-local devices live and what node selectors match."""

    ready = models.BooleanField(default=False)
    unschedulable = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="node_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="node_name_unique"),
        ]
        indexes = [
            # What-if's fingerprint reads the latest write per table (claims.whatif.listing).
            models.Index(fields=["cluster", "synced_at"], name="node_synced_idx"),
            # ... and lists the versions of the table that changed from the index alone.
            models.Index(
                fields=["cluster", "name", "uid", "resource_version", "synced_at"],
                name="node_versions_idx",
            ),
        ]


class Namespace(KubeObject):
    """A core/v1 Namespace: its labels decide what the API server admits there (admin access)."""

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="namespace_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="namespace_name_unique"),
        ]


class DeviceClass(KubeObject):
    """A resource.k8s.io DeviceClass: selectors and config that requests refer to by name."""

    selectors = models.JSONField(default=list, blank=True)
    config = models.JSONField(default=list, blank=True)
    extended_resource_name = models.CharField(max_length=253, blank=True, default="")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="deviceclass_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="deviceclass_name_unique"),
        ]
        verbose_name_plural = "device classes"

    @property
    def selected_driver(self) -> str | None:
        """The driver this class selects when its only selector is `device.driver == "x"`."""
        selectors = self.selectors or []
        if len(selectors) != 1 or not isinstance(selectors[0], dict):
            return None
        expression = (selectors[0].get("cel") or {}).get("expression")
        match = _DRIVER_SELECTOR.match(expression) if isinstance(expression, str) else None
        return match.group(1) if match else None


class ResourceClass(KubeObject):
    """A classic (v1alpha2) ResourceClass: the driver allocates claims of this class itself."""

    driver_name = models.CharField(max_length=253)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="resourceclass_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="resourceclass_name_unique"),
        ]
        verbose_name_plural = "resource classes"


class Pool(Scoped):
    """A pool of devices, named by driver and pool name, published across one or more slices.

    Only slices of the highest generation count; the pool is complete when all
    `resource_slice_count` slices of that generation are present.
    """

    driver = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    generation = models.BigIntegerField(default=0)
    resource_slice_count = models.PositiveIntegerField(default=1)
    slices_seen = models.PositiveIntegerField(default=0)
    complete = models.BooleanField(default=False)
    node_name = models.CharField(
        max_length=253,
        blank=True,
        default="",
        help_text="Set when every current slice of the pool is local to this one node.",
    )
    device_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["driver", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "driver", "name"], name="pool_driver_name_unique"
            ),
        ]
        indexes = [models.Index(fields=["cluster", "node_name"], name="pool_node_idx")]

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"

    def clean(self) -> None:
        if self.slices_seen > self.resource_slice_count and self.complete:
            raise ValidationError("a pool cannot hold more slices than resourceSliceCount")


class ResourceSlice(KubeObject):
    """A resource.k8s.io ResourceSlice: one published part of a pool."""

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="slices")
    driver = models.CharField(max_length=253)
    pool_name = models.CharField(max_length=253)
    generation = models.BigIntegerField(default=0)
    current = models.BooleanField(
        default=True, help_text="Belongs to the highest generation of its pool."
    )
    node_name = models.CharField(max_length=253, blank=True, default="")
    all_nodes = models.BooleanField(default=False)
    node_selector = models.JSONField(null=True, blank=True)
    per_device_node_selection = models.BooleanField(default=False)
    shared_counters = models.JSONField(default=list, blank=True)
    classic = models.BooleanField(default=False, help_text="A v1alpha2 namedResources slice.")

    class Meta:
        ordering = ["driver", "pool_name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="slice_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="slice_name_unique"),
        ]
        indexes = [
            # Also serves lookups by driver alone.
            models.Index(fields=["cluster", "driver", "pool_name"], name="slice_pool_idx"),
            models.Index(fields=["cluster", "node_name"], name="slice_node_idx"),
            # What-if's fingerprint reads the latest write per table (claims.whatif.listing).
            models.Index(fields=["cluster", "synced_at"], name="slice_synced_idx"),
            # ... and lists the versions of the table that changed from the index alone.
            models.Index(
                fields=["cluster", "name", "uid", "resource_version", "synced_at"],
                condition=models.Q(classic=False),
                name="slice_versions_idx",
            ),
        ]


class CounterSet(Scoped):
    """A set of shared counters (sharedCounters) that partitionable devices consume from."""

    # No index of its own: counterset_slice_name_unique leads with the slice.
    slice = models.ForeignKey(
        ResourceSlice, on_delete=models.CASCADE, related_name="counter_sets", db_index=False
    )
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="counter_sets")
    name = models.CharField(max_length=253)
    counters = models.JSONField(default=dict, help_text="counter name -> {value: quantity}")

    class Meta:
        ordering = ["pool_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["slice", "name"], name="counterset_slice_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.pool}/{self.name}"


class Device(Scoped):
    """One device of a ResourceSlice, identified by driver/pool/name."""

    # No index of its own: device_slice_name_unique leads with the slice.
    slice = models.ForeignKey(
        ResourceSlice, on_delete=models.CASCADE, related_name="devices", db_index=False
    )
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="devices")
    driver = models.CharField(max_length=253)
    pool_name = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    current = models.BooleanField(default=True)
    node_name = models.CharField(
        max_length=253,
        blank=True,
        default="",
        help_text="The node the device is local to (its own or its slice's nodeName).",
    )
    all_nodes = models.BooleanField(default=False)
    node_selector = models.JSONField(null=True, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    allow_multiple_allocations = models.BooleanField(default=False)
    consumes_counters = models.JSONField(default=list, blank=True)
    taints = models.JSONField(default=list, blank=True)
    tainted = models.BooleanField(default=False, db_index=True)
    binds_to_node = models.BooleanField(default=False)
    binding_conditions = models.JSONField(default=list, blank=True)
    binding_failure_conditions = models.JSONField(default=list, blank=True)
    spec = models.JSONField(default=dict, help_text="The device entry as published, v1 shape.")

    class Meta:
        ordering = ["driver", "pool_name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["slice", "name"], name="device_slice_name_unique"),
        ]
        indexes = [
            models.Index(
                fields=["cluster", "driver", "pool_name", "name"], name="device_identity_idx"
            ),
            models.Index(fields=["cluster", "node_name"], name="device_node_idx"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool_name}/{self.name}"


class DeviceTaintRule(KubeObject):
    """A DeviceTaintRule: taints applied to devices chosen by a selector."""

    driver = models.CharField(max_length=253, blank=True, default="")
    pool_name = models.CharField(max_length=253, blank=True, default="")
    device_name = models.CharField(max_length=253, blank=True, default="")
    taint = models.JSONField(default=dict)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="taintrule_uid_unique"),
            models.UniqueConstraint(fields=["cluster", "name"], name="taintrule_name_unique"),
        ]


class SyncState(Scoped):
    """The sync cursor and health of one kind; survives restarts.

    `resource_version` is the watch cursor: every event up to it is committed. It means
    something only on the cluster named by `cluster_uid` (the uid of its kube-system
    namespace) and only while `cursor_valid`: the watcher clears that when the server proved
    the cursor wrong (a different cluster, or a server behind the cursor after a restore) and
    sets it again after a list. `verified_at` is when the server last confirmed the data (a
    list, or a check on reconnect that the cursor is not ahead of the server). `served=False`
    with `not_served_reason` is neutral: the cluster has no such API, nothing is wrong.
    """

    # Without a list or cursor check for this long, a served kind counts as stale: the
    # watcher reconnects (and checks) at least every WATCH_TIMEOUT_SECONDS (290 s).
    STALE_AFTER = timedelta(minutes=15)

    kind = models.CharField(max_length=64, choices=Kind.choices)
    served_version = models.CharField(max_length=64, blank=True, default="")
    served = models.BooleanField(default=True)
    not_served_reason = models.TextField(blank=True, default="")
    resource_version = models.CharField(max_length=64, blank=True, default="")
    cluster_uid = models.CharField(max_length=64, blank=True, default="")
    cursor_valid = models.BooleanField(default=False)
    verified_at = models.DateTimeField(null=True, blank=True)
    object_count = models.PositiveIntegerField(default=0)
    events_total = models.BigIntegerField(default=0)
    events_per_second = models.FloatField(default=0.0)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_list_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    watcher = models.CharField(max_length=200, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    skipped = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["kind"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind"], name="syncstate_kind_unique")
        ]

    def __str__(self) -> str:
        return f"{self.kind}@{self.resource_version or '-'}"

    def is_stale(self, *, now: datetime | None = None, max_age: timedelta | None = None) -> bool:
        """The stored objects may differ from the cluster: cursor not valid, or unchecked too long.

        A kind the cluster does not serve is never stale (there is nothing to be stale about).
        """
        if not self.served:
            return False
        if not self.cursor_valid or not self.resource_version or self.verified_at is None:
            return True
        now = now or timezone.now()
        return now - self.verified_at > (max_age or self.STALE_AFTER)

    @property
    def health(self) -> str:
        """One word for status pages: not-served, error, stale or ok (in that precedence)."""
        if not self.served:
            return "not-served"
        if self.last_error:
            return "error"
        if self.is_stale():
            return "stale"
        return "ok"


class SkippedObject(Scoped):
    """An object the sync could not normalize: recorded, skipped, the stream carried on."""

    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    api_version = models.CharField(max_length=64, blank=True, default="")
    field = models.CharField(max_length=500, blank=True, default="")
    error = models.TextField()
    seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="skipped_kind_ns_name_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.error}"


class SnapshotImport(Scoped):
    """One `manage.py import_snapshot` run: when, full or merge, and what it stored per kind.

    Written in the import's own transaction. Data that came from a snapshot has no watcher
    keeping it current: the newest import tells `inventory.freshness` when it was taken in.
    """

    # Older runs are only history; an import keeps this many.
    KEPT = 20

    imported_at = models.DateTimeField(default=timezone.now, db_index=True)
    merge = models.BooleanField(default=False)
    stored = models.JSONField(default=dict, blank=True, help_text="kind -> objects stored")

    class Meta:
        ordering = ["-imported_at", "-pk"]

    def __str__(self) -> str:
        return f"{'merge' if self.merge else 'import'} at {self.imported_at:%Y-%m-%d %H:%M:%S}"


class TableVersion(models.Model):
    """How many transactions have written one table (`inventory.versions`): database triggers
    bump it in commit order, so a reader who has seen a version sees any later write as a new
    one. Kept values (class membership, counts, leaks, the what-if's cluster) are keyed by it."""

    name = models.CharField(max_length=63, primary_key=True, help_text="the table's name")
    version = models.BigIntegerField(default=0)
    # Transactions that deleted rows: a reader following changes by synced_at reads again.
    deletes = models.BigIntegerField(default=0)
    # When the last writing transaction began (PostgreSQL) or committed (SQLite).
    written_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
