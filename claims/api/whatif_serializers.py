"""Serializers of the what-if API: the question, the 400 body, jobs, and the typed answer.

The answer serializers describe the dict `claims.whatif.service.what_if` returns so that the
OpenAPI schema publishes its shape (components `WhatIfAnswer`, `WhatIfNode`, ...); the views
return the service's dict as it is, so the JSON is the service's, byte for byte.
`tests/claims/whatif/test_answer_schema.py` checks real answers against the published schema:
a key the service adds without declaring it here fails there.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from claims.whatif.nodepage import MAX_NODE_GROUPS
from claims.whatif.options import (
    MAX_COUNT,
    MAX_NODES_LIMIT,
    MAX_NODES_OFFSET,
    NODES_LIMIT_DEFAULT,
)
from inventory.freshness import STATES

# Objects passed through as Kubernetes spells them (a v1 NodeSelector, tolerations, opaque
# driver parameters): described, not typed field by field.
_K8S_OBJECT = "as in the Kubernetes resource.k8s.io/v1 API"


class WhatIfRequestSerializer(serializers.Serializer):
    """A what-if question (only types are checked here; the service checks meaning)."""

    yaml = serializers.JSONField(
        help_text="YAML or JSON text of ResourceClaims, a ResourceClaimTemplate, a Pod or a "
        "workload with a pod template (any supported API version); or the object itself."
    )
    nodes = serializers.JSONField(
        required=False, help_text="Node names to consider (a list, or one comma-separated text)."
    )
    nodeSelector = serializers.JSONField(
        required=False, help_text="Label selector `k=v,k2 in (a,b)` or a map."
    )
    count = serializers.JSONField(
        required=False, help_text=f'Copies to place (headroom), 1..{MAX_COUNT} or "max".'
    )
    assume = serializers.JSONField(
        required=False,
        help_text="Changes to assume: release-claim, remove-node, add-nodes (`like` an existing "
        "node, or a `shape`: {node, slices} with `{node}` placeholders; 1,000 added nodes and "
        "20,000 added devices at most), taint-device, untaint-device, drop-pool (objects with "
        "`op`; one object alone is a list of one). In the query string: YAML or JSON text.",
    )
    features = serializers.JSONField(
        required=False,
        help_text="Allocator feature switches. In the query string: YAML or JSON text.",
    )
    namespace = serializers.CharField(required=False, help_text="Default namespace.")
    gang = serializers.BooleanField(
        required=False,
        help_text="All claims of the input on one node, all or nothing (default: pods are "
        "placed one after another).",
    )
    preemption = serializers.BooleanField(
        required=False,
        help_text="When the pod fits nowhere: the node and the lower-priority pods the "
        "scheduler's DefaultPreemption would evict there (answer `preemption`).",
    )
    nodesOffset = serializers.JSONField(
        required=False,
        help_text=f"The first node (in name order) of the window whose verdicts the answer "
        f"holds: 0..{MAX_NODES_OFFSET} (default 0).",
    )
    nodesLimit = serializers.JSONField(
        required=False,
        help_text=f"How many nodes' verdicts the answer holds: 1..{MAX_NODES_LIMIT}, or "
        f'"all" (or 0) for every node; default {NODES_LIMIT_DEFAULT}. Counts are over every '
        "node whatever the window.",
    )


class WhatIfErrorSerializer(serializers.Serializer):
    """Bad input: the field at fault (`count`, `yaml: document 1: spec...`) and why."""

    field = serializers.CharField()
    detail = serializers.CharField()


class WhatIfDeviceSerializer(serializers.Serializer):
    """One allocated device: an AllocationResult's device result plus the claim it is for."""

    claim = serializers.CharField(help_text="namespace/name")
    request = serializers.CharField()
    driver = serializers.CharField()
    pool = serializers.CharField()
    device = serializers.CharField()
    adminAccess = serializers.BooleanField(required=False)
    tolerations = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=_K8S_OBJECT
    )
    bindingConditions = serializers.ListField(child=serializers.CharField(), required=False)
    bindingFailureConditions = serializers.ListField(child=serializers.CharField(), required=False)
    shareID = serializers.CharField(required=False)
    consumedCapacity = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="capacity name -> quantity"
    )


class WhatIfOpaqueConfigSerializer(serializers.Serializer):
    driver = serializers.CharField()
    parameters = serializers.JSONField(help_text=_K8S_OBJECT)


class WhatIfConfigSerializer(serializers.Serializer):
    """Device configuration as the allocator returns it: class config first, then the claim's."""

    source = serializers.ChoiceField(choices=["FromClass", "FromClaim"])
    requests = serializers.ListField(child=serializers.CharField(), required=False)
    opaque = WhatIfOpaqueConfigSerializer(required=False)


class WhatIfClaimAllocationSerializer(serializers.Serializer):
    """One claim's allocation on a node: its devices, node selector and configuration."""

    claim = serializers.CharField(help_text="namespace/name")
    devices = WhatIfDeviceSerializer(many=True)
    nodeSelector = serializers.DictField(allow_null=True, help_text=_K8S_OBJECT)
    config = WhatIfConfigSerializer(many=True)


class WhatIfStageSerializer(serializers.Serializer):
    stage = serializers.CharField()
    remaining = serializers.IntegerField(help_text="devices left after this stage")


class WhatIfTakenSerializer(serializers.Serializer):
    device = serializers.CharField(help_text="driver/pool/device")
    stage = serializers.CharField(help_text='"already allocated" or "counters or capacity"')


class WhatIfRequestReportSerializer(serializers.Serializer):
    """Why one request of a claim does not fit a node: the filter funnel, stage by stage."""

    claim = serializers.CharField()
    request = serializers.CharField()
    wanted = serializers.IntegerField()
    stage = serializers.CharField(help_text='the stage that left too few devices ("": none)')
    reason = serializers.CharField()
    stages = WhatIfStageSerializer(many=True)
    taken = WhatIfTakenSerializer(
        many=True,
        help_text="devices only other claims keep from this request (at most 32): "
        "held (already allocated) or their counters or capacity used up",
    )


class WhatIfFilterSerializer(serializers.Serializer):
    filter = serializers.CharField(
        help_text="the scheduler filter plugin, e.g. TaintToleration, NodePorts, NodeResourcesFit"
    )
    reason = serializers.CharField(help_text='in the scheduler\'s words; several joined by ", "')
    reasons = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text='each reason, when the plugin gave several ("Insufficient cpu", ...)',
    )


class WhatIfNodeSerializer(serializers.Serializer):
    """One node's verdict: claims with devices when it fits, else reasons or an error."""

    node = serializers.CharField()
    schedulable = serializers.BooleanField(help_text="no scheduler filter removed the node")
    fits = serializers.BooleanField(help_text="the devices fit (whether or not schedulable)")
    filter = WhatIfFilterSerializer(required=False)
    claims = WhatIfClaimAllocationSerializer(many=True, required=False)
    reasons = WhatIfRequestReportSerializer(many=True, required=False)
    error = serializers.CharField(required=False)


class WhatIfPlacementSerializer(serializers.Serializer):
    """A schedulable node the claims fit on, with the devices they would get."""

    node = serializers.CharField()
    devices = WhatIfDeviceSerializer(many=True)
    claims = WhatIfClaimAllocationSerializer(many=True)


class WhatIfStrandedSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="free devices, partitions and whole devices alike")
    units = serializers.IntegerField(
        help_text="free physical units among them: devices, or the counter set partitions "
        "share, with nothing on them allocated (a partitioned GPU counts once)"
    )
    byNode = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="node -> free devices of the claims' classes no further copy can use",
    )


class WhatIfNodesPageSerializer(serializers.Serializer):
    """Where the answer's window of nodes (`nodes`, `placements`) sits among all of them."""

    offset = serializers.IntegerField()
    limit = serializers.IntegerField(allow_null=True, help_text="null: every node from offset")
    total = serializers.IntegerField(help_text="nodes checked")
    returned = serializers.IntegerField()
    next = serializers.IntegerField(
        allow_null=True, help_text="the next page's nodesOffset; null on the last page"
    )


class WhatIfNodeGroupSerializer(serializers.Serializer):
    """Nodes counted per outcome: those the pod fits on, then per reason those it does not."""

    fits = serializers.BooleanField(help_text="the pod fits there (devices and every filter)")
    filter = serializers.CharField(
        help_text='the scheduler filter that removes these nodes ("DynamicResources" for '
        'devices; "" for the fitting nodes and nodes the time budget left unasked)'
    )
    reason = serializers.CharField(help_text="its reason, as the scheduler's FitError counts it")
    nodes = serializers.IntegerField()
    firstNodes = serializers.ListField(
        child=serializers.CharField(), help_text="the first few of them, in name order"
    )


class WhatIfSummarySerializer(serializers.Serializer):
    nodesChecked = serializers.IntegerField()
    nodesFit = serializers.IntegerField()
    nodesFitSchedulable = serializers.IntegerField()
    nodesNotEvaluated = serializers.IntegerField(help_text="left unasked by the time budget")
    firstNode = serializers.CharField(allow_null=True)
    headroom = serializers.IntegerField(help_text="copies placed")
    count = serializers.IntegerField(help_text="copies asked for (after the cap)")
    countCapped = serializers.BooleanField()
    stranded = WhatIfStrandedSerializer(allow_null=True)


class WhatIfCopiesSerializer(serializers.Serializer):
    node = serializers.CharField()
    copies = serializers.IntegerField()


class WhatIfHeadroomSerializer(serializers.Serializer):
    """Copies placed first-fit in node-name order, each seeing the ones before."""

    requested = serializers.IntegerField()
    placed = serializers.IntegerField()
    placements = WhatIfCopiesSerializer(
        many=True, help_text="the nodes of the answer's window that took copies"
    )
    placementsTotal = serializers.IntegerField(help_text="nodes that took copies")
    stoppedBecause = serializers.CharField()
    exhausted = serializers.BooleanField()


class WhatIfBestReasonSerializer(serializers.Serializer):
    claim = serializers.CharField(required=False)
    request = serializers.CharField(required=False)
    stage = serializers.CharField(required=False)
    reason = serializers.CharField()


class WhatIfBestNodeSerializer(serializers.Serializer):
    """A node that came closest, and what stopped it."""

    node = serializers.CharField()
    reasons = WhatIfBestReasonSerializer(many=True)


class WhatIfDiagnosisSerializer(serializers.Serializer):
    """When nothing fits: the closest node and its requests' funnels."""

    reasons = serializers.ListField(child=serializers.CharField())
    node = serializers.CharField(allow_null=True)
    requests = WhatIfRequestReportSerializer(many=True)


class WhatIfPodClaimSerializer(WhatIfClaimAllocationSerializer):
    shared = serializers.BooleanField(help_text="allocated for an earlier pod of the input")
    driverAllocated = serializers.BooleanField(help_text="classic (v1alpha2): not simulated")


class WhatIfFilteredNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    filter = serializers.CharField()
    reason = serializers.CharField()


class WhatIfFilteredSerializer(serializers.Serializer):
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="filter -> nodes")
    nodes = WhatIfFilteredNodeSerializer(many=True)


class WhatIfPodSerializer(serializers.Serializer):
    """One pod of the input, placed in turn (or the gang's node)."""

    pod = serializers.CharField()
    source = serializers.CharField()
    workload = serializers.CharField(help_text='e.g. "Deployment/web" ("" for a bare pod)')
    fits = serializers.BooleanField()
    node = serializers.CharField(allow_null=True)
    claims = WhatIfPodClaimSerializer(many=True)
    filtered = WhatIfFilteredSerializer()
    reasons = serializers.ListField(child=serializers.CharField())
    best = WhatIfBestNodeSerializer(many=True)


class WhatIfQuotaItemSerializer(serializers.Serializer):
    quota = serializers.CharField()
    resource = serializers.CharField()
    hard = serializers.CharField()
    used = serializers.CharField()
    requested = serializers.IntegerField(help_text="for all copies, rounded up to a whole unit")
    requestedQuantity = serializers.CharField(
        help_text='for all copies, exactly, as a Kubernetes quantity ("500m", "2Gi")'
    )
    exceeded = serializers.BooleanField()


class WhatIfQuotaNotAppliedSerializer(serializers.Serializer):
    quota = serializers.CharField()
    reason = serializers.CharField()


class WhatIfQuotaSerializer(serializers.Serializer):
    """ResourceQuota admission of the pods and claims the what-if would create (times the
    copies), as the API server's pod and ResourceClaim evaluators count them."""

    namespace = serializers.CharField()
    checked = serializers.BooleanField()
    allowed = serializers.BooleanField()
    items = WhatIfQuotaItemSerializer(many=True)
    copiesAllowed = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    notApplied = WhatIfQuotaNotAppliedSerializer(many=True)


class WhatIfClaimSerializer(serializers.Serializer):
    claim = serializers.CharField(help_text="namespace/name")
    source = serializers.CharField()
    existing = serializers.BooleanField()
    driverAllocated = serializers.BooleanField()


class WhatIfApiServerCheckSerializer(serializers.Serializer):
    claim = serializers.CharField()
    check = serializers.ChoiceField(choices=["adminAccess", "reservedFor"])
    allowed = serializers.BooleanField(allow_null=True, help_text="null: not known")
    message = serializers.CharField()


class WhatIfApiServerSerializer(serializers.Serializer):
    """What the API server would refuse before the scheduler ever saw the claims."""

    checks = WhatIfApiServerCheckSerializer(many=True)
    reservedForLimit = serializers.IntegerField()
    servedVersion = serializers.CharField()


class WhatIfIgnoredSerializer(serializers.Serializer):
    """A document of the input left aside, or a scheduler plugin what-if does not run
    (`document` "", kind SchedulerFilter, SchedulerPostFilter or SchedulerProfile)."""

    document = serializers.CharField(allow_blank=True)
    kind = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    reason = serializers.CharField()


class WhatIfVictimSerializer(serializers.Serializer):
    """A pod preemption would evict; its namespace names who owns it."""

    namespace = serializers.CharField()
    name = serializers.CharField()
    priority = serializers.IntegerField()
    claims = serializers.ListField(child=serializers.CharField(), help_text="claims it uses")
    devicesFreed = serializers.ListField(
        child=serializers.CharField(),
        help_text="driver/pool/device of its claims no other consumer holds (freed once it is "
        "gone; the scheduler's dry run does not count them)",
    )


class WhatIfPreemptorSerializer(serializers.Serializer):
    priority = serializers.IntegerField()
    priorityClassName = serializers.CharField(allow_blank=True)
    preemptionPolicy = serializers.CharField()


class WhatIfPreemptionSerializer(serializers.Serializer):
    """DefaultPreemption for a pod that fits nowhere (`claims.whatif.preemption`)."""

    preemptor = WhatIfPreemptorSerializer(help_text="the pod's priority as admission sets it")
    node = serializers.CharField(allow_null=True, help_text="null: preemption does not help")
    victims = WhatIfVictimSerializer(many=True, help_text="most important first")
    pdbViolations = serializers.IntegerField(
        help_text="victims evicted past a PodDisruptionBudget's disruptionsAllowed"
    )
    candidates = serializers.IntegerField(help_text="nodes where evicting makes room")
    message = serializers.CharField(allow_blank=True)


class WhatIfGaveUpSerializer(serializers.Serializer):
    budgetSeconds = serializers.FloatField(allow_null=True)
    searchedSeconds = serializers.FloatField()
    cancelled = serializers.BooleanField()
    message = serializers.CharField()


# A pattern, not an enum: drf-spectacular names every enum by its field, and ResourceClaim's
# `state` has another one.
@extend_schema_field({"type": "string", "pattern": f"^({'|'.join(STATES)})$"})
class FreshnessStateField(serializers.CharField):
    """One of `inventory.freshness.STATES`: live, stale, switching or snapshot."""


class WhatIfClusterSerializer(serializers.Serializer):
    """Which cluster answered and how current its stored state was (`inventory.freshness`)."""

    uid = serializers.CharField(
        allow_blank=True, help_text='the uid of its kube-system namespace ("" when unknown)'
    )
    state = FreshnessStateField(
        help_text="live: the sync is current; stale: it is not (the watch fails or is silent); "
        "switching: another cluster or a relist under way, answered from the last complete "
        "state; snapshot: imported data, no sync",
    )
    asOf = serializers.DateTimeField(
        allow_null=True, help_text="the data matched the cluster at least until then"
    )


class WhatIfAnswerSerializer(serializers.Serializer):
    """Would this fit, where, with which devices, and if not, why (see `what_if`)."""

    fits = serializers.BooleanField(
        allow_null=True, help_text="every pod placed; null when nothing is simulated"
    )
    nodes = WhatIfNodeSerializer(
        many=True,
        help_text="per node, for the gang or first pod: the window nodesPage describes",
    )
    nodesPage = WhatIfNodesPageSerializer()
    placements = WhatIfPlacementSerializer(
        many=True, help_text="the fitting schedulable nodes of the window"
    )
    firstPlacement = WhatIfPlacementSerializer(
        allow_null=True, help_text="the scheduler's first pick, whatever the window"
    )
    nodeGroups = WhatIfNodeGroupSerializer(
        many=True,
        help_text=f"every node counted per outcome and reason (at most {MAX_NODE_GROUPS} "
        "reasons, then one group for the rest)",
    )
    summary = WhatIfSummarySerializer(allow_null=True)
    headroom = WhatIfHeadroomSerializer(allow_null=True)
    reasons = serializers.ListField(child=serializers.CharField())
    best = WhatIfBestNodeSerializer(many=True)
    diagnosis = WhatIfDiagnosisSerializer(allow_null=True)
    pods = WhatIfPodSerializer(many=True)
    quota = WhatIfQuotaSerializer()
    claims = WhatIfClaimSerializer(many=True)
    apiServer = WhatIfApiServerSerializer()
    ignored = WhatIfIgnoredSerializer(many=True)
    gang = serializers.BooleanField()
    driverAllocated = serializers.ListField(
        child=serializers.CharField(), help_text="classic (v1alpha2) claims: not simulated"
    )
    simulated = serializers.BooleanField()
    assumed = serializers.ListField(child=serializers.CharField())
    namespace = serializers.CharField()
    fingerprint = serializers.CharField()
    cached = serializers.BooleanField()
    elapsedSeconds = serializers.FloatField()
    gaveUp = WhatIfGaveUpSerializer(
        required=False, help_text="past the time budget, or cancelled: a partial answer"
    )
    preemption = WhatIfPreemptionSerializer(
        required=False, help_text="only when asked (`preemption: true`) and the pod fits nowhere"
    )
    cluster = WhatIfClusterSerializer()


class WhatIfTrimmedListSerializer(serializers.Serializer):
    kept = serializers.IntegerField()
    total = serializers.IntegerField()


class WhatIfTrimmedSerializer(serializers.Serializer):
    maxBytes = serializers.IntegerField()
    bytes = serializers.IntegerField()
    lists = serializers.DictField(child=WhatIfTrimmedListSerializer(), help_text="path -> cut")
    message = serializers.CharField()


class WhatIfJobResultSerializer(WhatIfAnswerSerializer):
    """A job's answer, cut to a size when it was too large: then `trimmed` says what was cut,
    and as a last resort only fits, summary, gang, simulated, namespace, fingerprint, cluster
    and gaveUp are kept. Every field is therefore optional here."""

    trimmed = WhatIfTrimmedSerializer(required=False)

    def get_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = super().get_fields()
        for field in fields.values():
            field.required = False
        return fields


class WhatIfJobProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    phase = serializers.CharField(help_text='"nodes", "copies", "pods" or "" before the start')


class WhatIfJobSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    progress = WhatIfJobProgressSerializer()
    result = WhatIfJobResultSerializer(allow_null=True)
    error = WhatIfErrorSerializer(allow_null=True)
    created = serializers.FloatField(help_text="Unix time")


class ClaimHolderPodSerializer(serializers.Serializer):
    namespace = serializers.CharField(allow_blank=True, help_text='"" when hidden')
    name = serializers.CharField()
    hidden = serializers.BooleanField(
        required=False, help_text="in a namespace the reader may not see: named by place only"
    )


class ClaimHolderSerializer(ClaimHolderPodSerializer):
    """A claim holding a device the pending claim could use, and the pods reserving it."""

    pods = ClaimHolderPodSerializer(many=True)


class ClaimTakenSerializer(WhatIfTakenSerializer):
    claims = ClaimHolderSerializer(many=True, help_text="the claims holding it (at most 8)")
    more = serializers.IntegerField(help_text="holding claims beyond those named")


class ClaimDiagnosisRequestSerializer(WhatIfRequestReportSerializer):
    taken = ClaimTakenSerializer(
        many=True,
        help_text="devices only other claims keep from this request (at most 32), with the "
        "claims holding them (`claims.whatif.holders`)",
    )


class ClaimDiagnosisSerializer(serializers.Serializer):
    """Why a pending claim does not fit (`claims.whatif.diagnosis`), kept current by the diagnosis
    task and made when its page is opened. A classic claim's carries only driverAllocated,
    reasons, pods and fingerprint."""

    fits = serializers.BooleanField(allow_null=True, required=False)
    nodesChecked = serializers.IntegerField(allow_null=True, required=False)
    nodesFit = serializers.IntegerField(allow_null=True, required=False)
    firstNode = serializers.CharField(allow_null=True, required=False)
    best = WhatIfBestNodeSerializer(many=True, required=False)
    reasons = serializers.ListField(child=serializers.CharField())
    requests = ClaimDiagnosisRequestSerializer(many=True, required=False)
    node = serializers.CharField(
        allow_null=True, required=False, help_text="the closest node, whose funnels `requests` are"
    )
    pods = serializers.ListField(child=serializers.CharField(), help_text="pods waiting for it")
    fingerprint = serializers.CharField()
    cluster = WhatIfClusterSerializer(
        required=False, help_text="absent from diagnoses made before it was recorded"
    )
    error = WhatIfErrorSerializer(required=False)
    driverAllocated = serializers.BooleanField(required=False)
