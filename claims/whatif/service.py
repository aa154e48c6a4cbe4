"""`what_if`: the question users come for, answered over the synced cluster (read-only).

Reads the database (cluster state, stored templates and claims a pod names, the namespace's
ResourceQuotas, the labels of the claims' namespaces), never writes it. Identical questions on
an unchanged cluster are answered from the Django cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from django.core.cache import cache

from claims.models import LimitRange, ResourceClaim, ResourceClaimTemplate, ResourceQuota
from claims.whatif.answer import answer_for
from claims.whatif.engine import Progress, Simulation
from claims.whatif.extended import class_mapping
from claims.whatif.follow import view_change
from claims.whatif.inputs import JSON
from claims.whatif.kept import KeptAnswers, KeptSimulations, assumed_slices
from claims.whatif.listing import fingerprint_of, table_versions
from claims.whatif.options import MAX_ADDED_DEVICES, Options, parse_options
from claims.whatif.pods import ParsedInput, parse_input
from claims.whatif.preemption import read_inputs as read_preemption_inputs
from claims.whatif.quota import (
    QuotaObject,
)
from claims.whatif.state import (
    ClusterSwitching,
    build_view,
    cluster_state,
    complete_state,
    settle_heap,
)
from dashboard.cancel import SHUTTING_DOWN, stop_reason
from dashboard.gcpause import gc_paused
from dashboard.timings import observe_whatif_seconds
from inventory.freshness import SWITCHING, Freshness, cluster_freshness
from inventory.models import DeviceClass, Namespace, SyncState

log = logging.getLogger(__name__)

RESULT_CACHE_SECONDS = 600
_SIMULATIONS_KEPT = 4
# Simulations with assumptions kept for reuse; their assumptions may have added at most this many
# devices in all (two requests at MAX_ADDED_DEVICES), beyond what the cluster itself costs.
_SIMULATIONS_KEPT_DEVICES = 2 * MAX_ADDED_DEVICES
_simulations = KeptSimulations(limit=_SIMULATIONS_KEPT, max_devices=_SIMULATIONS_KEPT_DEVICES)
_simulations_lock = threading.Lock()
# Per set of features, the simulation without assumptions that follows the cluster; the most
# recently used few only (each holds the allocator's view of the whole cluster, and the features
# are the caller's to choose).
_live: OrderedDict[str, Simulation] = OrderedDict()
_LIVE_KEPT = 2
_LIVE_WAIT_SECONDS = 2.0
_CACHE_PREFIX = "whatif:result:"
# The latest answers, as JSON bytes (see KeptAnswers); at most 16 MB of them.
_answers = KeptAnswers(limit=8, max_bytes=16 * 1024 * 1024)


def lookup_object(*, kind: str, namespace: str, name: str) -> JSON | None:
    """A stored ResourceClaimTemplate or ResourceClaim (normalized), or None."""
    model = ResourceClaimTemplate if kind == "ResourceClaimTemplate" else ResourceClaim
    obj = model.objects.filter(namespace=namespace, name=name).values_list("obj", flat=True).first()
    return obj if isinstance(obj, dict) else None


def namespace_quotas(namespace: str) -> list[QuotaObject]:
    """The namespace's ResourceQuotas (hard, used, scope selectors), by name.

    Upstream's ResourceClaim quota evaluator matches no scope, so a quota with `scopes` or a
    `scopeSelector` never limits claims; the pod evaluator applies it to the pods it matches.
    """
    return [
        QuotaObject.from_spec(name, hard or {}, used or {}, (obj or {}).get("spec") or {})
        for name, hard, used, obj in ResourceQuota.objects.filter(namespace=namespace)
        .order_by("name")
        .values_list("name", "hard", "used", "obj")
    ]


def namespace_limit_ranges(namespaces: Iterable[str]) -> dict[str, list[JSON]]:
    """Per namespace, its LimitRanges (as `{"spec": {"limits": ...}}`), by name."""
    out: dict[str, list[JSON]] = {}
    for namespace, limits in (
        LimitRange.objects.filter(namespace__in=sorted(set(namespaces)))
        .order_by("namespace", "name")
        .values_list("namespace", "limits")
    ):
        out.setdefault(namespace, []).append({"spec": {"limits": limits or []}})
    return out


def namespace_labels(parsed: ParsedInput) -> dict[str, dict[str, str]]:
    """Labels of the input's namespaces: its Namespace documents first, then the synced ones.

    Only namespaces the input's claims live in (and its default namespace) are read. A namespace
    neither pasted nor synced is left out: its labels are unknown.
    """
    wanted = {parsed.namespace} | {
        str((claim.obj.get("metadata") or {}).get("namespace") or "") for claim in parsed.claims
    }
    missing = sorted(wanted - set(parsed.namespaces) - {""})
    stored = {
        name: {str(k): str(v) for k, v in (labels or {}).items()}
        for name, labels in Namespace.objects.filter(name__in=missing).values_list("name", "labels")
    }
    return {**stored, **parsed.namespaces}


def extended_resource_mapping() -> dict[str, str]:
    """Extended resource name -> the DeviceClass backing it, from the stored classes."""
    return class_mapping(
        {"metadata": {"name": name}, "spec": {"extendedResourceName": extended}}
        for name, extended in DeviceClass.objects.values_list("name", "extended_resource_name")
    )


def served_claim_version() -> str:
    """The resource.k8s.io version the ResourceClaim watch uses ("" before the first sync)."""
    return str(
        SyncState.objects.filter(kind="ResourceClaim")
        .values_list("served_version", flat=True)
        .first()
        or ""
    )


@contextmanager
def simulation_for(
    fingerprint: str, options: Options, *, versions: dict[str, str] | None = None
) -> Iterator[Simulation]:
    """A Simulation for the cluster at `fingerprint` with the options' assumptions and features.

    Without assumptions, one simulation per set of features follows the cluster (`_live`): a
    newer state is applied to it as a change (`Simulation.follow`), and it keeps per-node
    verdicts of recent questions, so a question asked again after a change asks the allocator
    only about the nodes the change touched. Requests take it in turn (waiting up to
    `_LIVE_WAIT_SECONDS`; past that they build a private one). Simulations with assumptions are
    kept (a few, most recent first) so that a repeated question reuses the pools built for
    every node; one that another request is using is not shared: a new one is built.
    """
    if not options.assume:
        with _live_simulation(fingerprint, options, versions=versions) as sim:
            yield sim
        return
    key = json.dumps([fingerprint, options.assume, options.features], sort_keys=True)
    sim = _simulations.get(key)
    built: list[JSON] | None = None
    if sim is None or not sim.lock.acquire(blocking=False):
        state, slice_cache = cluster_state(fingerprint=fingerprint)
        view = build_view(state, slice_cache, options.assume)
        sim = Simulation(view, features=options.feature_set())
        sim.lock.acquire()
        built = assumed_slices(view, state.slices)
        _simulations.keep(key, sim, assumed=built)
    try:
        yield sim
    finally:
        if sim.cancelled:
            # Nobody waits for this answer: keep nothing it built.
            _simulations.drop(key, sim)
        if built is not None:
            _simulations.release(key, sim, assumed=built)
        sim.lock.release()


def kept_simulations() -> tuple[int, int]:
    """How many simulations with assumptions are kept, and the devices their assumptions added."""
    return _simulations.summary()


@contextmanager
def _live_simulation(
    fingerprint: str, options: Options, *, versions: dict[str, str] | None
) -> Iterator[Simulation]:
    key = json.dumps(options.features, sort_keys=True)
    with _simulations_lock:
        sim = _live.get(key)
        if sim is not None:
            _live.move_to_end(key)
    if sim is None or not sim.lock.acquire(timeout=_LIVE_WAIT_SECONDS):
        state, slice_cache = cluster_state(fingerprint=fingerprint, versions=versions)
        fresh = Simulation(build_view(state, slice_cache, ()), features=options.feature_set())
        fresh.keep_verdicts()
        fresh.lock.acquire()
        if sim is None:
            with _simulations_lock:
                _keep_live(key, fresh)
        sim = fresh
    try:
        if sim.view.fingerprint != fingerprint:
            state, slice_cache = cluster_state(fingerprint=fingerprint, versions=versions)
            view = build_view(state, slice_cache, ())
            change = view_change(sim.view, view)
            if change.rebuild:
                sim.lock.release()
                sim = Simulation(view, features=options.feature_set())
                sim.keep_verdicts()
                sim.lock.acquire()
                with _simulations_lock:
                    _keep_live(key, sim)
            else:
                sim.follow(view, change)
        yield sim
    finally:
        sim.lock.release()


def warm_live_simulation() -> int:
    """Read the cluster and build the live simulation for the default features, with every
    node's allocator pools, before any question asks (a web process at start, in the
    background): the first question then costs what any new question costs, not a cold read.

    Built apart and installed only when no request installed one meanwhile, so a question
    arriving during the build never waits for it. Returns how many nodes got their pools.
    """
    versions, fingerprint, _ = current_state()
    options = parse_options()
    key = json.dumps(options.features, sort_keys=True)
    state, slice_cache = cluster_state(fingerprint=fingerprint, versions=versions)
    sim = Simulation(build_view(state, slice_cache, ()), features=options.feature_set())
    sim.keep_verdicts()
    sim.prepare_nodes()
    with _simulations_lock:
        if key not in _live:
            _keep_live(key, sim)
    # Its pools (a second of building at 5,000 nodes) frozen without a young pass over them.
    settle_heap(young_pass=False)
    return len(sim.view.nodes)


def _keep_live(key: str, sim: Simulation) -> None:
    """Keep `sim` as the live simulation for `key`; the least recently used go past the bound.
    Must hold `_simulations_lock`."""
    _live[key] = sim
    _live.move_to_end(key)
    while len(_live) > _LIVE_KEPT:
        _live.popitem(last=False)


def forget_simulations() -> None:
    """Drop kept simulations and the answers kept in this process (tests)."""
    _simulations.clear()
    with _simulations_lock:
        _live.clear()
    _answers.clear()


def _cache_key(
    parsed: ParsedInput,
    options: Options,
    fingerprint: str,
    quotas: list[Any],
    *,
    extra: Sequence[Any] = (),
) -> str:
    def strip_uid(obj: JSON) -> JSON:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "uid"}
        return {**obj, "metadata": meta}

    payload = {
        "pods": [
            [
                p.ref,
                p.source,
                p.spec,
                p.workload,
                p.per_node,
                [[strip_uid(c.obj), c.existing, c.classic, c.source] for c in p.claims],
            ]
            for p in parsed.pods
        ],
        "namespace": parsed.namespace,
        "namespaces": parsed.namespaces,
        "ignored": parsed.ignored,
        "options": options.canonical(),
        "fingerprint": fingerprint,
        "quotas": quotas,
        "extra": list(extra),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return _CACHE_PREFIX + hashlib.sha256(text.encode()).hexdigest()


def check_question(
    source: Any,
    *,
    nodes: Sequence[str] | str | None = None,
    node_selector: str | Mapping[str, str] | None = None,
    count: int | str = 1,
    assume: Sequence[Mapping[str, Any]] | None = None,
    features: Mapping[str, bool] | None = None,
    namespace: str | None = None,
    gang: bool | str | None = False,
    preemption: bool | str | None = False,
    nodes_offset: int | str | None = 0,
    nodes_limit: int | str | None = None,
) -> None:
    """Raise WhatIfError when `what_if` would refuse this input, without allocating anything.

    Jobs call it before they are queued, so bad input is a 400 at once, not a failed job later.
    """
    parse_options(
        nodes=nodes,
        node_selector=node_selector,
        count=count,
        assume=assume,
        features=features,
        explain=False,
        gang=gang,
        preemption=preemption,
        nodes_offset=nodes_offset,
        nodes_limit=nodes_limit,
    )
    parse_input(
        source,
        namespace=namespace,
        lookup=lambda kind, ns, name: lookup_object(kind=kind, namespace=ns, name=name),
        extended=extended_resource_mapping(),
    )


def what_if(
    source: Any,
    *,
    nodes: Sequence[str] | str | None = None,
    node_selector: str | Mapping[str, str] | None = None,
    count: int | str = 1,
    assume: Sequence[Mapping[str, Any]] | None = None,
    features: Mapping[str, bool] | None = None,
    namespace: str | None = None,
    explain: bool = True,
    gang: bool | str | None = False,
    preemption: bool | str | None = False,
    nodes_offset: int | str | None = 0,
    nodes_limit: int | str | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
    budget: float | None = None,
) -> JSON:
    """Would these pods and claims fit, where, with which devices, and if not, why? (read-only)

    `source`: YAML or JSON text (several documents or a `kind: List` allowed), a parsed object,
    or a list of objects, in any API version the sync understands: Pods and workloads
    (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob; expanded to the pods their
    controllers make), whose `resourceClaims` name templates (looked up in the input, then the
    database) or claims, and whose containers may ask for extended resources a DeviceClass backs
    (the scheduler's implicit claim); ResourceClaims and templates (without any pod: allocated
    together, like one pod's claims); a bare claim spec `{"devices": ...}`; Namespaces (their
    labels decide the admin-access check; without one, the synced Namespace's labels do). Other
    kinds are listed in `ignored`, and so are the scheduler plugins what-if does not run.
    Pods, with or without claims, are placed one after another, each seeing the devices, cpu,
    memory, pods and host ports the previous took beside what the synced pods of each node
    request (NodePorts and NodeResourcesFit, after the namespace's LimitRange defaults) and
    counting for their spread constraints and pod (anti-)affinity (PodTopologySpread,
    InterPodAffinity);
    ResourceQuota admission counts each pod and the claims it creates in turn, and a pod it
    refuses is not placed. `gang` puts all the input's claims on one node instead (all or
    nothing).
    Options: `nodes` (names, or one comma-separated text) and `node_selector` (`k=v,k2 in
    (a,b)` or a map) restrict the nodes; `count` copies (of the gang, or of the first pod) are
    placed first-fit in node-name order, each seeing the ones before (headroom; capped at
    10,000, "max" for the cap); `assume` is a list of
    changes applied to a private copy of the cluster: {"op": "release-claim", "claim": "ns/n"},
    {"op": "remove-node", "node": n}, {"op": "add-nodes", "like": n, "count": k},
    {"op": "taint-device", "device": "drv/pool/dev", "taint": {"key", "value", "effect"}},
    {"op": "untaint-device", "device": ..., "key": k-or-empty-for-all},
    {"op": "drop-pool", "pool": "drv/pool"}; `features` switches allocator features; `namespace`
    is the default namespace of the input (and the quota checked); `nodes_offset` and
    `nodes_limit` pick the window of nodes (in name order) whose verdicts the answer holds
    (`nodes`, `placements`, `headroom.placements`; `nodesPage` says where; a limit of None, 0
    or "all", the default here, is every node: the API, page and job doors default to
    NODES_LIMIT_DEFAULT). `budget` bounds the
    search in seconds: past it the nodes not yet asked are "not evaluated" and the answer
    carries `gaveUp` {budgetSeconds, searchedSeconds, cancelled, message} (never cached); the
    same, with `cancelled` true, when the client went away or the server stops meanwhile.

    Returns a JSON-ready dict. About the gang (or the first pod): `nodes` [{node, schedulable,
    filter?: {filter, reason, reasons?} (the scheduler filter that removed the node), fits, claims:
    [{claim, devices: [{claim, request, driver, pool, device, consumedCapacity?, shareID?}],
    nodeSelector, config}] | reasons: [{claim, request, wanted, stage, reason, stages: [{stage,
    remaining}]}] | error}] (the window's nodes), `nodesPage` {offset, limit, total, returned,
    next}, `placements` (the window's fitting schedulable nodes: {node, devices, claims}),
    `firstPlacement` (the scheduler's first pick, whatever the window: {node, devices, claims} or
    None), `nodeGroups` [{fits, filter, reason, nodes, firstNodes}] (every node, counted per
    reason: `claims.whatif.nodepage`), `summary` {nodesChecked, nodesFit, nodesFitSchedulable,
    nodesNotEvaluated, firstNode, headroom, count, countCapped, stranded: {total, byNode}} (over
    every node), `headroom` {requested, placed, placements: [{node, copies}] (the window's
    nodes), placementsTotal, stoppedBecause, exhausted}, `best` (the nodes that came closest:
    {node, reasons}),
    `diagnosis` ({reasons, node, requests} of the closest node, when nothing fits). Per pod:
    `pods` [{pod, source, workload, fits, node, claims: [{claim, devices, nodeSelector, config,
    shared, driverAllocated}], filtered: {counts: {filter: nodes}, nodes: [{node, filter,
    reason}]}, reasons, best}]. Overall: `fits` (every pod placed; None when nothing is
    simulated), `reasons` (lines, when something does not fit), `quota` {namespace, checked,
    allowed, items: [{quota, resource, hard, used, requested, requestedQuantity, exceeded}],
    copiesAllowed,
    message, notApplied: [{quota, reason}]}, `apiServer` {checks: [{claim, check, allowed
    (None: unknown), message}], reservedForLimit, servedVersion}, `claims` [{claim, source,
    existing, driverAllocated}], `ignored` [{document, kind, name, reason}], `gang`,
    `driverAllocated` (classic v1alpha2 claims: not simulated), `simulated`, `assumed` (lines),
    `namespace`, `fingerprint`, `cached`, `elapsedSeconds`, `cluster` {uid, state (live, stale,
    switching, snapshot), asOf} (`inventory.freshness`: which cluster, how current).

    Raises WhatIfError (a ValueError with `.field` and `.message`) for bad input.
    """
    started = time.perf_counter()
    options = parse_options(
        nodes=nodes,
        node_selector=node_selector,
        count=count,
        assume=assume,
        features=features,
        explain=explain,
        gang=gang,
        preemption=preemption,
        nodes_offset=nodes_offset,
        nodes_limit=nodes_limit,
    )
    parsed = parse_input(
        source,
        namespace=namespace,
        # parse_input's Lookup callback is called positionally (kind, namespace, name).
        lookup=lambda kind, ns, name: lookup_object(kind=kind, namespace=ns, name=name),
        extended=extended_resource_mapping(),
    )
    versions, fingerprint, label = current_state()
    quotas = namespace_quotas(parsed.namespace)
    limit_ranges = namespace_limit_ranges(p.namespace for p in parsed.pods)
    served = served_claim_version()
    labels = namespace_labels(parsed)
    preemption_inputs = read_preemption_inputs() if options.preemption else None
    key = _cache_key(
        parsed,
        options,
        fingerprint,
        [[q.name, q.hard, q.used, list(q.scopes)] for q in quotas],
        extra=[
            served,
            labels,
            limit_ranges,
            *(
                [preemption_inputs.classes, preemption_inputs.budgets]
                if preemption_inputs is not None
                else []
            ),
        ],
    )
    if use_cache:
        text: str | bytes | None = _answers.get(key)
        if text is None:
            text = cache.get(key)
        if isinstance(text, (str, bytes)):
            # Decoded JSON holds no reference cycle, yet its many containers set off full
            # collections that walk the whole resident state: 0.45 s of a 30 ms decode at 5,000
            # nodes.
            with gc_paused():
                answer = orjson.loads(text)
            answer["cluster"] = label
            answer["cached"] = True
            answer["elapsedSeconds"] = round(time.perf_counter() - started, 4)
            observe_whatif_seconds(time.perf_counter() - started)
            return answer
    with simulation_for(fingerprint, options, versions=versions) as sim:
        sim.start_budget(budget)
        # A question makes many containers and next to no reference cycles; the collections it
        # set off walked the whole resident cluster state (a third of a new question at 5,000
        # nodes).
        try:
            with gc_paused():
                answer = answer_for(
                    parsed,
                    options=options,
                    view=sim.view,
                    quotas=quotas,
                    limit_ranges=limit_ranges,
                    served_version=served,
                    namespaces=labels,
                    progress=progress,
                    simulation=sim,
                    preemption=preemption_inputs,
                )
        finally:
            sim.end_budget()
        gave_up, cancelled = sim.gave_up, sim.cancelled
        if sim.view.fingerprint != fingerprint:
            # A switch began meanwhile: answered from the last complete state, not the one
            # this key names.
            label = switching_label(sim.view.freshness) or label
            use_cache = False
    answer["cluster"] = label
    answer["elapsedSeconds"] = round(time.perf_counter() - started, 4)
    if gave_up is not None:
        summary = answer.get("summary") or {}
        checked = int(summary.get("nodesChecked") or 0)
        evaluated = checked - int(summary.get("nodesNotEvaluated") or 0)
        answer["gaveUp"] = {
            "budgetSeconds": budget,
            "searchedSeconds": round(gave_up, 3),
            "cancelled": cancelled,
            "message": (
                f"cancelled after {answer['elapsedSeconds']:g} s ({stop_reason() or SHUTTING_DOWN})"
                if cancelled
                else f"gave up after {budget:g} s"
            )
            + f"; partial answer: {evaluated} of {checked} nodes evaluated",
        }
        # A partial answer depends on timing: never served again from the cache.
        use_cache = False
    if use_cache:
        # One JSON text: a megabyte answer is written and read by orjson several times faster
        # than the cache's own JSON serializer would (it only escapes one string then).
        data = orjson.dumps(answer)
        cache.set(key, data.decode(), RESULT_CACHE_SECONDS)
        _answers.keep(key, data)
    answer = dict(answer)
    answer["cached"] = False
    observe_whatif_seconds(time.perf_counter() - started)
    return answer


def current_state() -> tuple[dict[str, str] | None, str, JSON]:
    """The table versions and fingerprint to answer from, and the answer's `cluster`.

    While the sync is switching the tables may hold two states of the cluster: the answer then
    comes from the last complete state, says `switching` and that state's cluster and time; with
    none, ClusterSwitching (a 503). No transaction here (on SQLite each takes the write lock):
    a switch that begins after this read is caught by the listing, which reads the freshness
    with the data (`claims.whatif.state.cluster_state`).
    """
    versions = table_versions()
    freshness = cluster_freshness()
    if freshness.state != SWITCHING:
        return versions, fingerprint_of(versions), freshness.answer()
    complete = complete_state()
    if complete is None:
        raise ClusterSwitching(freshness)
    label = switching_label(complete.freshness) or {**freshness.answer(), "asOf": None}
    return None, complete.fingerprint, label


def switching_label(freshness: Freshness | None) -> JSON | None:
    """The `cluster` of an answer made from a complete state while the sync is switching."""
    if freshness is None:
        return None
    return {**freshness.answer(), "state": SWITCHING}
