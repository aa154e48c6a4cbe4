"""Diagnoses of pending claims: for each claim a pod waits for, why it does not fit (kept current).

`refresh_diagnoses` reads the cluster once, builds one `Simulation`, asks it for every waiting
claim and writes `ResourceClaim.diagnosis` where it changed; claims nobody waits for any more lose
theirs. It only writes those two columns. Claims with the same spec in the same namespace, waited
for by pods with the same node constraints, share one computation (a Deployment's replicas),
made under a placeholder name that each diagnosis then replaces by its own claim's. Each says
which cluster it was made on and how current that was (`cluster`, as what-if answers do); while
the sync is switching clusters no diagnosis is made: the ones made before stay.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from claims.models import Pod, ResourceClaim
from claims.whatif.engine import Simulation, evaluate
from claims.whatif.holders import with_holders
from claims.whatif.inputs import JSON, InputClaim, WhatIfError
from claims.whatif.listing import fingerprint_of, table_versions
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.options import MAX_NODES_OFFSET, Options
from claims.whatif.state import ClusterSwitching, build_view, cluster_state
from dashboard.live import publish_changes
from inventory.freshness import SWITCHING, cluster_freshness

log = logging.getLogger(__name__)
# A window past any cluster's last node: an answer with counts, `best` and diagnosis but no
# per-node entries, which a diagnosis never shows.
_NO_NODES = Options(nodes_offset=MAX_NODES_OFFSET, nodes_limit=1)

# Answers computed by this process (shared ones once): tests count them to prove single flight.
COMPUTED = [0]
_computed_lock = threading.Lock()

_LAST_RUN_KEY = "whatif:diagnoses:last"
# The name shared computations use; never a valid claim name (it has upper-case letters).
_PLACEHOLDER = "Diagnosed-Claim-Placeholder"


def waiting_claims() -> dict[tuple[str, str], list[JSON]]:
    """(namespace, claim name) -> the unbound pods (name, tolerations) that wait for it."""

    waiting: dict[tuple[str, str], list[JSON]] = {}
    rows = Pod.objects.filter(node_name="", uses_claims=True).exclude(
        phase__in=["Succeeded", "Failed"]
    )
    for namespace, name, entries, statuses, obj in rows.values_list(
        "namespace", "name", "resource_claims", "claim_statuses", "obj"
    ):
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in statuses or []
            if s.get("resourceClaimName")
        }
        spec = (obj or {}).get("spec") or {}
        constraints = {
            k: spec.get(k) for k in ("tolerations", "nodeSelector", "affinity") if spec.get(k)
        }
        for entry in entries or []:
            claim_name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
            if claim_name:
                waiting.setdefault((namespace, str(claim_name)), []).append(
                    {
                        "pod": name,
                        "tolerations": constraints.get("tolerations") or [],
                        "constraints": constraints,
                    }
                )
    return waiting


def _compact(answer: JSON, pods: list[str], fingerprint: str) -> JSON:
    summary = answer.get("summary") or {}
    return {
        "fits": answer.get("fits"),
        "nodesChecked": summary.get("nodesChecked"),
        "nodesFit": summary.get("nodesFit"),
        "firstNode": summary.get("firstNode"),
        "best": answer.get("best") or [],
        "reasons": answer.get("reasons") or [],
        "requests": (answer.get("diagnosis") or {}).get("requests") or [],
        "node": (answer.get("diagnosis") or {}).get("node"),
        "pods": pods,
        "fingerprint": fingerprint,
    }


def _spec_key(obj: JSON, namespace: str, constraints: Any) -> str:
    text = json.dumps([obj.get("spec"), namespace, constraints], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _node_filter(constraints: JSON, *, where: str) -> NodeFilter:
    try:
        return NodeFilter.from_pod_spec(constraints, where=where)
    except WhatIfError:
        # A stored pod the API server accepted; keep what can be read.
        return NodeFilter(tolerations=list(constraints.get("tolerations") or []))


def _own(answer: JSON, *, namespace: str, name: str) -> JSON:
    """A shared answer with the placeholder claim replaced by this claim."""
    text = json.dumps(answer).replace(
        json.dumps(f"{namespace}/{_PLACEHOLDER}")[1:-1], json.dumps(f"{namespace}/{name}")[1:-1]
    )
    return dict(json.loads(text))


def _shared_answer(
    sim: Simulation, *, obj: JSON, namespace: str, pods: list[JSON], pod_names: list[str]
) -> JSON:
    """The what-if answer for a claim spec under a placeholder name, with the holders of the
    devices it could use; counted in `COMPUTED`."""
    constraints = pods[0]["constraints"] if pods else {}
    meta = {**(obj.get("metadata") or {}), "name": _PLACEHOLDER, "namespace": namespace}
    claim = InputClaim(
        obj={**obj, "metadata": meta}, source=f"ResourceClaim {namespace}/{_PLACEHOLDER}"
    )
    where = f"Pod {namespace}/{pod_names[0]}" if pod_names else f"ResourceClaim {namespace}"
    node_filter = _node_filter(constraints, where=where)
    with _computed_lock:
        COMPUTED[0] += 1
    sim.start_budget(settings.DIAGNOSIS_BUDGET_SECONDS)
    try:
        # Only the closest node's entry is read (below): none is built for the other nodes.
        answer = evaluate(
            sim, [claim], options=_NO_NODES, node_check=node_filter.check, with_stranded=False
        )
    except WhatIfError as exc:
        answer = {"fits": False, "error": exc.as_dict(), "reasons": [str(exc)]}
    finally:
        sim.end_budget()
    if sim.gave_up is not None:
        answer["reasons"] = [
            f"diagnosis gave up after {settings.DIAGNOSIS_BUDGET_SECONDS} s "
            "(partial: some nodes not evaluated)",
            *(answer.get("reasons") or []),
        ]
    diagnosis = answer.get("diagnosis") or {}
    requests = diagnosis.get("requests") or []
    node = diagnosis.get("node")
    if not requests and not answer.get("fits") and answer.get("best"):
        # Devices fit on a node the pod cannot use (tainted, cordoned): the engine then gives
        # no diagnosis; the closest node's reports say what keeps the usable ones from it.
        node = answer["best"][0].get("node")
        requests = _node_reasons(sim, claim, node=str(node), node_filter=node_filter)
    if requests:
        answer["diagnosis"] = {**diagnosis, "node": node, "requests": with_holders(requests)}
    return answer


def _node_reasons(
    sim: Simulation, claim: InputClaim, *, node: str, node_filter: NodeFilter
) -> list[JSON]:
    """One node's per-request reasons, the claim asked again on that node alone."""
    try:
        alone = evaluate(
            sim,
            [claim],
            options=Options(nodes=[node]),
            node_check=node_filter.check,
            with_stranded=False,
        )
    except WhatIfError:
        return []
    entries: list[JSON] = alone.get("nodes") or []
    return list(entries[0].get("reasons") or []) if entries else []


def _classic(pod_names: list[str], fingerprint: str, cluster: JSON) -> JSON:
    return {
        "driverAllocated": True,
        "reasons": ["classic (v1alpha2) claim: its driver allocates it, not the scheduler"],
        "pods": pod_names,
        "fingerprint": fingerprint,
        "cluster": cluster,
    }


def _finish(
    answer: JSON, *, name: str, namespace: str, pods: list[str], at: tuple[str, JSON]
) -> JSON:
    fingerprint, cluster = at
    answer = _own(answer, namespace=namespace, name=name)
    compact = _compact(answer, pods, fingerprint)
    compact["cluster"] = cluster
    if "error" in answer:
        compact["error"] = answer["error"]
    return compact


def _simulation(fingerprint: str, versions: dict[str, str]) -> Simulation | None:
    """One simulation of the state `fingerprint` names; None once a switch has begun since."""
    try:
        state, slice_cache = cluster_state(fingerprint=fingerprint, versions=versions)
    except ClusterSwitching:
        return None
    if state.fingerprint != fingerprint:
        return None
    return Simulation(build_view(state, slice_cache, []), features=Options().feature_set())


def diagnose_all(*, force: bool = False) -> dict[str, int]:
    """Recompute every waiting claim's diagnosis; returns counts (written, cleared, claims)."""

    versions = table_versions()
    fingerprint = fingerprint_of(versions)
    freshness = cluster_freshness()
    if freshness.state == SWITCHING:
        # The tables may hold two states of the cluster: diagnose once it is one again.
        return {"claims": 0, "written": 0, "cleared": 0, "skipped": 1}
    cluster = freshness.answer()
    waiting = waiting_claims()
    run_key = hashlib.sha256(
        json.dumps(
            [fingerprint, cluster["uid"], cluster["state"], sorted(map(list, waiting))],
            default=str,
        ).encode()
    ).hexdigest()
    if not force and cache.get(_LAST_RUN_KEY) == run_key:
        return {"claims": 0, "written": 0, "cleared": 0, "skipped": 1}
    pending = list(
        ResourceClaim.objects.filter(state="pending").values_list(
            "pk", "namespace", "name", "classic", "obj", "diagnosis"
        )
    )
    targets = [row for row in pending if (row[1], row[2]) in waiting]
    diagnoses: dict[int, JSON] = {}
    sim: Simulation | None = None
    by_spec: dict[str, JSON] = {}
    for pk, namespace, name, classic, obj, _ in targets:
        pods = waiting[(namespace, name)]
        pod_names = sorted({p["pod"] for p in pods})
        if classic:
            diagnoses[pk] = _classic(pod_names, fingerprint, cluster)
            continue
        key = _spec_key(obj, namespace, pods[0]["constraints"])
        answer = by_spec.get(key)
        if answer is None:
            sim = sim or _simulation(fingerprint, versions)
            if sim is None:
                # A switch began since: the next run diagnoses the state it comes to.
                return {"claims": 0, "written": 0, "cleared": 0, "skipped": 1}
            answer = _shared_answer(
                sim, obj=obj, namespace=namespace, pods=pods, pod_names=pod_names
            )
            by_spec[key] = answer
        diagnoses[pk] = _finish(
            answer, name=name, namespace=namespace, pods=pod_names, at=(fingerprint, cluster)
        )
    written, cleared = _write(pending, diagnoses)
    cache.set(_LAST_RUN_KEY, run_key, None)
    return {"claims": len(diagnoses), "written": written, "cleared": cleared, "skipped": 0}


def _same(old: Any, new: JSON) -> bool:
    # The fingerprint and the cluster's time change with every run; the rest is the diagnosis.
    def kept(value: JSON) -> JSON:
        out = {k: v for k, v in value.items() if k != "fingerprint"}
        if isinstance(out.get("cluster"), dict):
            out["cluster"] = {k: v for k, v in out["cluster"].items() if k != "asOf"}
        return out

    return isinstance(old, dict) and kept(old) == kept(new)


def _write(pending: Iterable[tuple[Any, ...]], diagnoses: dict[int, JSON]) -> tuple[int, int]:
    now = timezone.now()
    changed: list[str] = []
    written = 0
    with transaction.atomic():
        for pk, *_, old in pending:
            new = diagnoses.get(pk)
            if new is None or _same(old, new):
                continue
            ResourceClaim.objects.filter(pk=pk).update(diagnosis=new, diagnosed_at=now)
            changed.append(str(pk))
            written += 1
        stale = ResourceClaim.objects.filter(diagnosis__isnull=False).exclude(
            pk__in=list(diagnoses)
        )
        stale_pks = [str(pk) for pk in stale.values_list("pk", flat=True)]
        cleared = stale.update(diagnosis=None, diagnosed_at=now)
        changed.extend(stale_pks)
        publish_changes({"claims": changed})
    return written, cleared


# One computation per claim at a time in this process; other processes are kept out by a cache
# key (`_FLIGHT_KEY`) for as long as one computation may take.
_flights: dict[tuple[str, str], threading.Lock] = {}
_flights_lock = threading.Lock()
_FLIGHT_KEY = "whatif:diagnosis:flight:{namespace}/{name}"
# How long a request waits for another process's computation of the same claim, in polls.
_POLL_SECONDS = 0.05


def is_fresh(diagnosis: Any, fingerprint: str) -> bool:
    """Whether a stored diagnosis was made on the cluster state `fingerprint` names."""
    return isinstance(diagnosis, dict) and diagnosis.get("fingerprint") == fingerprint


def diagnose_claim(namespace: str, name: str) -> JSON | None:
    """The diagnosis of one pending claim on the current cluster state, computed now unless a
    fresh one is stored (single flight: requests opening the same claim together compute once).

    Returns None for a claim that is gone or not pending, and the stored diagnosis (possibly
    none) while the sync is switching clusters. A new diagnosis is written and announced live.
    """
    key = (namespace, name)
    with _flights_lock:
        lock = _flights.setdefault(key, threading.Lock())
    with lock:
        try:
            return _diagnose_claim(namespace, name)
        finally:
            with _flights_lock:
                if _flights.get(key) is lock:
                    del _flights[key]


def _stored(namespace: str, name: str) -> tuple[Any, ...] | None:
    return (
        ResourceClaim.objects.filter(namespace=namespace, name=name, state="pending")
        .values_list("pk", "classic", "obj", "diagnosis")
        .first()
    )


def _diagnose_claim(namespace: str, name: str) -> JSON | None:
    row = _stored(namespace, name)
    if row is None:
        return None
    versions = table_versions()
    fingerprint = fingerprint_of(versions)
    if is_fresh(row[3], fingerprint):
        return dict(row[3])
    freshness = cluster_freshness()
    if freshness.state == SWITCHING:
        return row[3] if isinstance(row[3], dict) else None
    flight = _FLIGHT_KEY.format(namespace=namespace, name=name)
    timeout = settings.DIAGNOSIS_BUDGET_SECONDS * 4 + 5
    if not cache.add(flight, fingerprint, timeout):
        # Another process computes it: wait for its answer, at most as long as it may take.
        for _ in range(int(timeout / _POLL_SECONDS)):
            time.sleep(_POLL_SECONDS)
            row = _stored(namespace, name)
            if row is None or is_fresh(row[3], fingerprint):
                return dict(row[3]) if row is not None else None
            if cache.get(flight) is None:
                break
        row = _stored(namespace, name)
        return row[3] if row is not None and isinstance(row[3], dict) else None
    try:
        return _compute_one(row, namespace=namespace, name=name, at=(versions, freshness))
    finally:
        cache.delete(flight)


def _compute_one(
    row: tuple[Any, ...], *, namespace: str, name: str, at: tuple[dict[str, str], Any]
) -> JSON | None:
    pk, classic, obj, old = row
    versions, freshness = at
    fingerprint = fingerprint_of(versions)
    cluster = freshness.answer()
    pods = waiting_claims().get((namespace, name), [])
    pod_names = sorted({p["pod"] for p in pods})
    if classic:
        diagnosis = _classic(pod_names, fingerprint, cluster)
    else:
        sim = _simulation(fingerprint, versions)
        if sim is None:
            return old if isinstance(old, dict) else None
        with sim.lock:
            answer = _shared_answer(
                sim, obj=obj, namespace=namespace, pods=pods, pod_names=pod_names
            )
        diagnosis = _finish(
            answer, name=name, namespace=namespace, pods=pod_names, at=(fingerprint, cluster)
        )
    with transaction.atomic():
        ResourceClaim.objects.filter(pk=pk, state="pending").update(
            diagnosis=diagnosis, diagnosed_at=timezone.now()
        )
        if not _same(old, diagnosis):
            publish_changes({"claims": [str(pk)]})
    return diagnosis
