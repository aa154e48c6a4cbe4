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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from django.core.cache import cache

from claims.models import ResourceClaim, ResourceClaimTemplate, ResourceQuota
from claims.whatif.admission import api_server_checks, reserved_for_limit
from claims.whatif.engine import Progress, Simulation, evaluate, select_nodes
from claims.whatif.extended import class_mapping
from claims.whatif.follow import view_change
from claims.whatif.inputs import JSON
from claims.whatif.kept import KeptSimulations, assumed_slices
from claims.whatif.listing import fingerprint_of, table_versions
from claims.whatif.nodefilter import check_all
from claims.whatif.options import MAX_ADDED_DEVICES, Options, parse_options
from claims.whatif.placement import expand_daemons, gang_pods, place_pods
from claims.whatif.pods import ParsedInput, distinct_claims, parse_input
from claims.whatif.quota import admission
from claims.whatif.state import ClusterView, build_view, cluster_state
from dashboard.cancel import SHUTTING_DOWN, stop_reason
from dashboard.timings import observe_whatif_seconds
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


def lookup_object(*, kind: str, namespace: str, name: str) -> JSON | None:
    """A stored ResourceClaimTemplate or ResourceClaim (normalized), or None."""
    model = ResourceClaimTemplate if kind == "ResourceClaimTemplate" else ResourceClaim
    obj = model.objects.filter(namespace=namespace, name=name).values_list("obj", flat=True).first()
    return obj if isinstance(obj, dict) else None


def namespace_quotas(namespace: str) -> list[tuple[str, JSON, JSON]]:
    """(name, hard, used) of each ResourceQuota of the namespace that applies to claims.

    Upstream's ResourceClaim quota evaluator matches no scope, so a quota with `scopes` or a
    `scopeSelector` never limits claims: those are left out (see `scoped_quotas`).
    """

    return [
        (name, hard or {}, used or {})
        for name, hard, used, obj in ResourceQuota.objects.filter(namespace=namespace)
        .order_by("name")
        .values_list("name", "hard", "used", "obj")
        if not _scoped(obj)
    ]


def scoped_quotas(namespace: str) -> list[str]:
    """Names of the namespace's scoped ResourceQuotas (they never apply to claims)."""
    return [
        name
        for name, obj in ResourceQuota.objects.filter(namespace=namespace)
        .order_by("name")
        .values_list("name", "obj")
        if _scoped(obj)
    ]


def _scoped(obj: Any) -> bool:
    spec = (obj or {}).get("spec") or {} if isinstance(obj, dict) else {}
    return bool(spec.get("scopes") or (spec.get("scopeSelector") or {}).get("matchExpressions"))


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


def _keep_live(key: str, sim: Simulation) -> None:
    """Keep `sim` as the live simulation for `key`; the least recently used go past the bound.
    Must hold `_simulations_lock`."""
    _live[key] = sim
    _live.move_to_end(key)
    while len(_live) > _LIVE_KEPT:
        _live.popitem(last=False)


def forget_simulations() -> None:
    """Drop kept simulations (tests)."""
    _simulations.clear()
    with _simulations_lock:
        _live.clear()


def _cache_key(
    parsed: ParsedInput,
    options: Options,
    fingerprint: str,
    quotas: list[tuple[str, JSON, JSON]],
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
    kinds are listed in `ignored`.
    Pods are placed one after another, each seeing the devices the previous took; `gang` puts
    all the input's claims on one node instead (all or nothing).
    Options: `nodes` (names, or one comma-separated text) and `node_selector` (`k=v,k2 in
    (a,b)` or a map) restrict the nodes; `count` copies (of the gang, or of the first pod) are
    placed first-fit in node-name order, each seeing the ones before (headroom; capped at
    10,000, "max" for the cap); `assume` is a list of
    changes applied to a private copy of the cluster: {"op": "release-claim", "claim": "ns/n"},
    {"op": "remove-node", "node": n}, {"op": "add-nodes", "like": n, "count": k},
    {"op": "taint-device", "device": "drv/pool/dev", "taint": {"key", "value", "effect"}},
    {"op": "untaint-device", "device": ..., "key": k-or-empty-for-all},
    {"op": "drop-pool", "pool": "drv/pool"}; `features` switches allocator features; `namespace`
    is the default namespace of the input (and the quota checked). `budget` bounds the
    search in seconds: past it the nodes not yet asked are "not evaluated" and the answer
    carries `gaveUp` {budgetSeconds, searchedSeconds, cancelled, message} (never cached); the
    same, with `cancelled` true, when the client went away or the server stops meanwhile.

    Returns a JSON-ready dict. About the gang (or the first pod): `nodes` [{node, schedulable,
    filter?: {filter, reason} (the scheduler filter that removed the node), fits, claims:
    [{claim, devices: [{claim, request, driver, pool, device, consumedCapacity?, shareID?}],
    nodeSelector, config}] | reasons: [{claim, request, wanted, stage, reason, stages: [{stage,
    remaining}]}] | error}], `placements` (fitting schedulable nodes: {node, devices, claims}),
    `summary` {nodesChecked, nodesFit, nodesFitSchedulable, firstNode, headroom, count,
    countCapped, stranded: {total, byNode}}, `headroom` {requested, placed, placements: [{node,
    copies}], stoppedBecause, exhausted}, `best` (the nodes that came closest: {node, reasons}),
    `diagnosis` ({reasons, node, requests} of the closest node, when nothing fits). Per pod:
    `pods` [{pod, source, workload, fits, node, claims: [{claim, devices, nodeSelector, config,
    shared, driverAllocated}], filtered: {counts: {filter: nodes}, nodes: [{node, filter,
    reason}]}, reasons, best}]. Overall: `fits` (every pod placed; None when nothing is
    simulated), `reasons` (lines, when something does not fit), `quota` {namespace, checked,
    allowed, items: [{quota, resource, hard, used, requested, exceeded}], copiesAllowed,
    message, notApplied: [{quota, reason}]}, `apiServer` {checks: [{claim, check, allowed
    (None: unknown), message}], reservedForLimit, servedVersion}, `claims` [{claim, source,
    existing, driverAllocated}], `ignored` [{document, kind, name, reason}], `gang`,
    `driverAllocated` (classic v1alpha2 claims: not simulated), `simulated`, `assumed` (lines),
    `namespace`, `fingerprint`, `cached`, `elapsedSeconds`.

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
    )
    parsed = parse_input(
        source,
        namespace=namespace,
        # parse_input's Lookup callback is called positionally (kind, namespace, name).
        lookup=lambda kind, ns, name: lookup_object(kind=kind, namespace=ns, name=name),
        extended=extended_resource_mapping(),
    )
    versions = table_versions()
    fingerprint = fingerprint_of(versions)
    quotas = namespace_quotas(parsed.namespace)
    scoped = scoped_quotas(parsed.namespace)
    served = served_claim_version()
    labels = namespace_labels(parsed)
    key = _cache_key(parsed, options, fingerprint, quotas, extra=[scoped, served, labels])
    if use_cache:
        hit = cache.get(key)
        if isinstance(hit, str):
            answer = orjson.loads(hit)
            answer["cached"] = True
            answer["elapsedSeconds"] = round(time.perf_counter() - started, 4)
            observe_whatif_seconds(time.perf_counter() - started)
            return answer
    with simulation_for(fingerprint, options, versions=versions) as sim:
        sim.start_budget(budget)
        try:
            answer = answer_for(
                parsed,
                options=options,
                view=sim.view,
                quotas=quotas,
                scoped_quotas=scoped,
                served_version=served,
                namespaces=labels,
                progress=progress,
                simulation=sim,
            )
        finally:
            sim.end_budget()
        gave_up, cancelled = sim.gave_up, sim.cancelled
    answer["elapsedSeconds"] = round(time.perf_counter() - started, 4)
    if gave_up is not None:
        evaluated = sum(1 for n in answer.get("nodes") or [] if "not evaluated" not in str(n))
        answer["gaveUp"] = {
            "budgetSeconds": budget,
            "searchedSeconds": round(gave_up, 3),
            "cancelled": cancelled,
            "message": (
                f"cancelled after {answer['elapsedSeconds']:g} s ({stop_reason() or SHUTTING_DOWN})"
                if cancelled
                else f"gave up after {budget:g} s"
            )
            + f"; partial answer: {evaluated} of {len(answer.get('nodes') or [])} nodes evaluated",
        }
        # A partial answer depends on timing: never served again from the cache.
        use_cache = False
    if use_cache:
        # One JSON text: a megabyte answer is written and read by orjson several times faster
        # than the cache's own JSON serializer would (it only escapes one string then).
        cache.set(key, orjson.dumps(answer).decode(), RESULT_CACHE_SECONDS)
    answer = dict(answer)
    answer["cached"] = False
    observe_whatif_seconds(time.perf_counter() - started)
    return answer


def answer_for(
    parsed: ParsedInput,
    *,
    options: Options,
    view: ClusterView,
    quotas: list[tuple[str, JSON, JSON]],
    scoped_quotas: Sequence[str] = (),
    served_version: str = "",
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    progress: Progress | None = None,
    simulation: Simulation | None = None,
) -> JSON:
    """The answer for parsed input over a cluster view (no database access).

    `namespaces` (name -> labels) are the namespaces whose labels are known; by default only
    the input's own Namespace documents.
    """
    sim = simulation or Simulation(view, features=options.feature_set())
    nodes = select_nodes(view.nodes, options)
    pods, cut_note = expand_daemons(parsed.pods, nodes)
    limit = reserved_for_limit(served_version)
    claims = distinct_claims(pods)
    known = parsed.namespaces if namespaces is None else namespaces
    refused, checks = api_server_checks(claims, namespaces=known, reserved_limit=limit)
    gang = options.gang or len(pods) <= 1
    # The top-level answer (per-node fit, headroom, stranded devices) is about the gang or the
    # first pod; `pods` then places every pod one after another.
    focus = pods if gang else pods[:1]
    simulated = [c for c in distinct_claims(focus) if not c.classic]
    if simulated:
        filters = [p.node_filter for p in focus]
        answer = evaluate(
            sim,
            simulated,
            options=options,
            node_check=lambda node: check_all(filters, node),
            progress=progress,
        )
        sim.reset()
    else:
        answer = {
            "fits": None,
            "nodes": [],
            "placements": [],
            "summary": None,
            "headroom": None,
            "reasons": [
                "no pod to place"
                if not pods
                else "classic (v1alpha2) claims are allocated by their driver, not simulated"
            ],
            "best": [],
            "diagnosis": None,
        }
    if gang:
        answer["pods"] = gang_pods(answer, pods)
    else:
        answer["pods"] = place_pods(
            sim,
            pods,
            nodes=nodes,
            refused=refused,
            reserved_limit=limit,
            explain=options.explain,
            progress=progress,
        )
        if answer["fits"] is not None:
            answer["fits"] = all(p["fits"] for p in answer["pods"])
        answer["reasons"] = [
            *answer["reasons"],
            *(
                f"pod {p['pod']}: {line}"
                for p in answer["pods"][1:]
                if not p["fits"]
                for line in p["reasons"][:3]
            ),
        ]
    blocking = [refused[c.ref] for c in claims if c.ref in refused]
    if blocking:
        answer["fits"] = False if answer["fits"] is not None else None
        answer["reasons"] = [*dict.fromkeys(blocking), *answer["reasons"]]
        if gang:
            for pod in answer["pods"]:
                pod.update(fits=False, node=None, claims=[], reasons=list(blocking))
    answer["quota"] = admission(
        claims,
        namespace=parsed.namespace,
        quotas=quotas,
        classes=view.classes,
        copies=options.count,
    )
    answer["quota"]["notApplied"] = [
        {"quota": name, "reason": "scoped: quota scopes never match ResourceClaims"}
        for name in scoped_quotas
    ]
    answer["claims"] = [
        {
            "claim": c.ref,
            "source": c.source,
            "existing": c.existing,
            "driverAllocated": c.classic,
        }
        for c in claims
    ]
    answer["apiServer"] = {
        "checks": checks,
        "reservedForLimit": limit,
        "servedVersion": served_version,
    }
    answer["ignored"] = list(parsed.ignored) + (
        [{"document": "", "kind": "DaemonSet", "name": "", "reason": cut_note}] if cut_note else []
    )
    answer["gang"] = gang
    answer["driverAllocated"] = [c.ref for c in claims if c.classic]
    answer["simulated"] = bool(simulated)
    answer["assumed"] = list(view.assumed)
    answer["namespace"] = parsed.namespace
    answer["fingerprint"] = view.fingerprint
    return answer
