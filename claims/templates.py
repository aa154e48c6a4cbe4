"""Which ResourceClaimTemplate a generated ResourceClaim was made from.

The claim carries the annotation `resource.kubernetes.io/pod-claim-name`: the name of the
*pod's* `spec.resourceClaims[]` entry, not of a template. The template is named by that entry's
`resourceClaimTemplateName`, so the link goes through the owning pod (stored, with its
`resource_claims` column).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection

from claims.models import Pod, ResourceClaim
from inventory.sync import chunks

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"


def pod_claim_name(obj: Mapping[str, Any] | None) -> str:
    """The pod's claim entry name a generated claim carries in its annotations, or ""."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(POD_CLAIM_NAME) or "")


def template_of_entry(resource_claims: Sequence[Mapping[str, Any]], entry: str) -> str:
    """The `resourceClaimTemplateName` of the pod's `resourceClaims` entry named `entry`."""
    for item in resource_claims or []:
        if isinstance(item, Mapping) and item.get("name") == entry:
            return str(item.get("resourceClaimTemplateName") or "")
    return ""


def template_names(claims: Iterable[ResourceClaim]) -> dict[int, str]:
    """claim pk → template name, through each claim's owning pod (one query for all pods)."""
    claims = [c for c in claims if c.owner_pod and pod_claim_name(c.obj)]
    if not claims:
        return {}
    namespaces = {c.namespace for c in claims}
    names = {c.owner_pod for c in claims}
    pods = {
        (namespace, name): resource_claims
        for namespace, name, resource_claims in Pod.objects.filter(
            namespace__in=namespaces, name__in=names
        ).values_list("namespace", "name", "resource_claims")
    }
    found = {}
    for claim in claims:
        resource_claims = pods.get((claim.namespace, claim.owner_pod))
        if resource_claims is not None:
            found[claim.pk] = template_of_entry(resource_claims, pod_claim_name(claim.obj))
    return found


def link_templates(claims: Iterable[ResourceClaim]) -> int:
    """Store each claim's template name in its `template_name` column; how many changed.

    Claims whose pod is not stored yet keep "" until the pod arrives (the pod sync calls this
    for the claims it owns).
    """
    claims = list(claims)
    names = template_names(claims)
    changed = []
    for claim in claims:
        wanted = names.get(claim.pk, "")
        if claim.template_name != wanted:
            claim.template_name = wanted
            changed.append(claim)
    if not changed:
        return 0
    changed.sort(key=lambda claim: claim.pk)
    if connection.features.has_select_for_update:
        # Rows locked in key order first, as `update_rows` writes claims: the claims watcher and
        # the pods watcher (re-linking the claims of its pods) then wait for each other instead
        # of deadlocking, which cost one of them its batch and a retry once an ingest run.
        # The updates below, one name at a time, wait for nothing after this.
        pks = [claim.pk for claim in changed]
        for part in chunks(pks):
            list(
                ResourceClaim.objects.select_for_update(no_key=True)
                .filter(pk__in=part)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
    # One UPDATE per template name: bulk_update's CASE over every changed row took longer than
    # the rest of a snapshot import's claim writes (thousands of claims, a few dozen templates).
    by_name: dict[str, list[int]] = {}
    for claim in changed:
        by_name.setdefault(claim.template_name, []).append(claim.pk)
    for name, pks in by_name.items():
        for part in chunks(pks):
            ResourceClaim.objects.filter(pk__in=part).update(template_name=name)
    return len(changed)


def link_claims_of_pods(pods: Iterable[tuple[str, str]]) -> int:
    """Re-link the claims owned by these (namespace, name) pods, after the pods changed."""
    pods = list(pods)
    if not pods:
        return 0
    names = sorted({name for _, name in pods})
    wanted = set(pods)
    # By owner_pod alone, its index: a namespace filter beside it made SQLite scan the
    # namespaces' claims instead. Pods of the same name elsewhere are left out here.
    claims = [
        claim
        for part in chunks(names)
        for claim in ResourceClaim.objects.filter(owner_pod__in=part).only(
            "pk", "namespace", "owner_pod", "template_name", "obj"
        )
        if (claim.namespace, claim.owner_pod) in wanted
    ]
    return link_templates(claims)
