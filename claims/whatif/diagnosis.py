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
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from claims.models import Pod, ResourceClaim
from claims.whatif.engine import Simulation, evaluate
from claims.whatif.inputs import JSON, InputClaim, WhatIfError
from claims.whatif.listing import fingerprint_of, table_versions
from claims.whatif.nodefilter import NodeFilter
from claims.whatif.options import Options
from claims.whatif.state import ClusterSwitching, build_view, cluster_state
from dashboard.live import publish_changes
from inventory.freshness import SWITCHING, cluster_freshness

log = logging.getLogger(__name__)

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
            diagnoses[pk] = {
                "driverAllocated": True,
                "reasons": ["classic (v1alpha2) claim: its driver allocates it, not the scheduler"],
                "pods": pod_names,
                "fingerprint": fingerprint,
                "cluster": cluster,
            }
            continue
        constraints = pods[0]["constraints"]
        key = _spec_key(obj, namespace, constraints)
        answer = by_spec.get(key)
        if answer is None:
            if sim is None:
                try:
                    state, slice_cache = cluster_state(fingerprint=fingerprint, versions=versions)
                except ClusterSwitching:
                    state = None
                if state is None or state.fingerprint != fingerprint:
                    # A switch began since: the next run diagnoses the state it comes to.
                    return {"claims": 0, "written": 0, "cleared": 0, "skipped": 1}
                view = build_view(state, slice_cache, [])
                sim = Simulation(view, features=Options().feature_set())
            meta = {**(obj.get("metadata") or {}), "name": _PLACEHOLDER, "namespace": namespace}
            claim = InputClaim(
                obj={**obj, "metadata": meta}, source=f"ResourceClaim {namespace}/{_PLACEHOLDER}"
            )
            node_filter = _node_filter(constraints, where=f"Pod {namespace}/{pod_names[0]}")
            sim.start_budget(settings.DIAGNOSIS_BUDGET_SECONDS)
            try:
                answer = evaluate(
                    sim,
                    [claim],
                    options=Options(),
                    node_check=node_filter.check,
                    with_stranded=False,
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
            by_spec[key] = answer
        answer = _own(answer, namespace=namespace, name=name)
        compact = _compact(answer, pod_names, fingerprint)
        compact["cluster"] = cluster
        if "error" in answer:
            compact["error"] = answer["error"]
        diagnoses[pk] = compact
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
