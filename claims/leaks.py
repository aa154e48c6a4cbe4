"""Leaked allocations: devices held for nobody, found in the synced state.

Four kinds, each with when it began (`since`) and where that time comes from (`since_source`):

- `unreserved`: a claim allocated but reserved for nobody for longer than
  settings.LEAK_UNRESERVED_SECONDS. The resourceclaim controller deallocates a claim as soon as
  its last consumer goes, so an allocation that stays unreserved is held for nobody. Since: the
  later of `status.allocation.allocationTimestamp` and the last write of the claim's status
  (`metadata.managedFields[].time` of the `status` subresource, which is the write that removed
  the last reservation), else the claim's creation.
- `reserved-for-missing-pod`: a `status.reservedFor` entry naming a pod that no longer exists (no
  pod of that namespace and name, or one with another uid). A deleted pod leaves no record, so
  since is unknown (null), unless the pod was last seen terminating (its deletionTimestamp).
- `reserved-for-finished-pod`: a `status.reservedFor` pod in phase Succeeded or Failed. Since:
  the latest `finishedAt` of its terminated containers, else its Ready condition's last
  transition.
- `owner-pod-gone`: a claim whose owner pod (`metadata.ownerReferences`, kind Pod) no longer
  exists; the garbage collector should have deleted it. Since: unknown (null), or the claim's
  deletionTimestamp when it is already being deleted.
- `device-in-missing-pool`: an allocation result naming a pool with no current devices (its
  slices are gone). Slice deletions are not recorded, so since is unknown (null).

Pod-based kinds are only reported when pods are known (a Pod sync has listed, or pods are
stored), else every reservation would look leaked.

The leaks are kept in process memory with the claim (and pod) each is about: after a change of
claims or pods, only the claims written since, the reservations naming the pods written since
and the claims those pods own are checked again (`_follow`); a deletion, a slice change or many
changes read everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import reduce
from operator import or_
from typing import Any

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q, Subquery, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from claims.choices import ClaimState
from claims.devices.classes import table_fingerprint, written_since
from claims.models import AllocatedDevice, Pod, Reservation, ResourceClaim
from claims.stored_leaks import Parts, leaks_digest, read_stored_leaks, store_leaks
from dashboard.kept import Kept
from inventory.choices import Kind
from inventory.models import Device, ResourceSlice, SyncState
from inventory.visibility import EVERYTHING, Visibility

KINDS = (
    "unreserved",
    "reserved-for-missing-pod",
    "reserved-for-finished-pod",
    "owner-pod-gone",
    "device-in-missing-pool",
)
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Leak:
    """One leaked holding: which claim, what it is about, since when (None: unknown)."""

    kind: str
    namespace: str
    claim: str
    detail: str
    since: datetime | None
    since_source: str
    devices: tuple[str, ...] = ()

    def as_dict(self, now: datetime) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "claim": self.claim,
            "detail": self.detail,
            "since": self.since.isoformat() if self.since else None,
            "since_source": self.since_source,
            "age_seconds": (now - self.since).total_seconds() if self.since else None,
            "devices": list(self.devices),
        }


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def _meta(claim: ResourceClaim) -> Mapping[str, Any]:
    raw = claim.raw if isinstance(claim.raw, Mapping) else {}
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status_written(claim: ResourceClaim) -> datetime | None:
    """The last time the claim's status was written, from managedFields."""
    times = [
        _time(entry.get("time"))
        for entry in _meta(claim).get("managedFields") or []
        if isinstance(entry, Mapping) and entry.get("subresource") == "status"
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _allocated_at(claim: ResourceClaim) -> datetime | None:
    status = (claim.obj or {}).get("status") or {}
    return _time((status.get("allocation") or {}).get("allocationTimestamp"))


def unreserved_since(claim: ResourceClaim) -> tuple[datetime | None, str]:
    """When an allocated claim was last left without consumers, and how that was found."""
    found = [
        (t, source)
        for t, source in (
            (_allocated_at(claim), "allocationTimestamp"),
            (_status_written(claim), "managedFields status time"),
        )
        if t is not None
    ]
    if found:
        return max(found, key=lambda pair: pair[0])
    if claim.created_at:
        return claim.created_at, "creationTimestamp"
    return None, "unknown"


def pods_known() -> bool:
    """Whether the stored pods can be trusted to say that a pod does not exist."""
    listed = SyncState.objects.filter(
        kind=Kind.POD, served=True, last_list_at__isnull=False
    ).exists()
    return listed or Pod.objects.exists()


def _pod_finished_at(pod: Pod) -> tuple[datetime | None, str]:
    status = ((pod.obj or {}).get("status")) or {}
    finished = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            terminated = ((container or {}).get("state") or {}).get("terminated") or {}
            moment = _time(terminated.get("finishedAt"))
            if moment is not None:
                finished.append(moment)
    if finished:
        return max(finished), "containerStatuses finishedAt"
    for condition in status.get("conditions") or []:
        if (condition or {}).get("type") == "Ready":
            moment = _time(condition.get("lastTransitionTime"))
            if moment is not None:
                return moment, "Ready lastTransitionTime"
    return None, "unknown"


PodKey = tuple[str, str]


@dataclass(frozen=True)
class _KeptLeaks:
    """Every leak but the unreserved ones, and every allocated claim reserved for nobody (a
    leak once its `since` is older than the threshold), as of `fingerprint`: (the claims'
    table, the slices' with the threshold, the pods', whether pods are known).

    Each leak is also kept with its claim's pk (and a reservation's leak with its pod), so that
    a change of a few claims or pods checks again only those claims, the reservations naming
    those pods and the claims they own. `loose_owners`: claims whose owners are not one pod
    (pods other than their `owner_pod` decide them), checked again on every pod change."""

    fingerprint: tuple[Any, ...]
    unreserved: tuple[Leak, ...]
    others: tuple[Leak, ...]
    unreserved_of: tuple[tuple[Leak, int], ...] = ()
    reserved: tuple[tuple[Leak, int, PodKey], ...] = ()
    owned: tuple[tuple[Leak, int], ...] = ()
    in_missing_pools: tuple[tuple[Leak, int], ...] = ()
    loose_owners: frozenset[int] = frozenset()


_kept: Kept[_KeptLeaks] = Kept()


def forget_leaks() -> None:
    """Drop the kept leaks (tests; the fingerprint normally makes this unnecessary)."""
    _kept.forget()


def find_leaks(*, now: datetime | None = None) -> list[Leak]:
    """Every leak of the synced state, sorted by kind, namespace and claim.

    What the leaks follow (claims with their allocations and reservations, pods, slices, and
    whether pods are known) is read again only when one of their tables moves, so /leaks/ and
    every /metrics scrape cost a few small queries while the cluster holds still; `now` only
    decides which unreserved claims have waited past the threshold.
    """
    return _leaks_at(_kept_leaks(), now or timezone.now())


def known_leaks(*, now: datetime | None = None) -> list[Leak] | None:
    """The leaks as last read, whatever changed since, without reading anything; None when
    none were read yet (a scrape during the web process's warm-up serves what is known)."""
    kept = _kept.last()
    return None if kept is None else _leaks_at(kept, now or timezone.now())


def _leaks_at(kept: _KeptLeaks, now: datetime) -> list[Leak]:
    threshold = settings.LEAK_UNRESERVED_SECONDS
    leaks = [
        leak
        for leak in kept.unreserved
        if leak.since is None or (now - leak.since).total_seconds() >= threshold
    ]
    leaks.extend(kept.others)
    # Whole key: leaks kept pod by pod come in another order than a reading from scratch.
    return sorted(
        leaks,
        key=lambda leak: (KINDS.index(leak.kind), leak.namespace, leak.claim, leak.detail),
    )


def warm_leaks() -> None:
    """Every leak read as a web process starts (`console.serve`): from what an earlier process
    stored at the same table versions, else read and stored for the next one. Pages and scrapes
    read stored leaks in a new process too, but write none."""
    _kept_leaks(store=True)


def _kept_leaks(*, store: bool = False) -> _KeptLeaks:
    # Allocations and reservations are written with their claim, devices with their slice.
    # The threshold is part of each unreserved leak's detail.
    fingerprint = _fingerprint()
    return _kept.get(
        fingerprint,
        lambda previous: (
            _follow(previous, fingerprint)
            or _read_leaks(fingerprint, first=previous is None, store=store)
        ),
    )


def _fingerprint() -> tuple[Any, ...]:
    tables = table_fingerprint(ResourceClaim, ResourceSlice, Pod)
    return (
        tables[:3],
        (tables[3:6], settings.LEAK_UNRESERVED_SECONDS),
        tables[6:],
        pods_known(),
    )


# More claims and pods changed than this since the last reading: every leak is read again.
_FEW_CHANGES = 200


def _follow(kept: _KeptLeaks | None, fingerprint: tuple[Any, ...]) -> _KeptLeaks | None:
    """The leaks after a change of claims, pods and slices, from `kept`: only the claims written
    since and the reservations naming the pods written since (and the claims those pods own)
    are checked again, and after a slice change the allocations in missing pools (few) are
    read again. None when the threshold or whether pods are known moved, a claim or pod was
    deleted, or many changed: the caller reads everything then."""
    if kept is None or kept.fingerprint[1][1] != fingerprint[1][1]:
        return None
    if kept.fingerprint[3] != fingerprint[3]:
        return None
    claims = written_since(ResourceClaim, kept.fingerprint[0], fingerprint[0], limit=_FEW_CHANGES)
    pods = written_since(Pod, kept.fingerprint[2], fingerprint[2], limit=_FEW_CHANGES)
    if claims is None or pods is None or len(claims) + len(pods) > _FEW_CHANGES:
        return None
    changed = {claim.pk for claim in claims}
    named = {(pod.namespace, pod.name) for pod in pods}
    nothing = Q(pk__in=[])
    unreserved = [pair for pair in kept.unreserved_of if pair[1] not in changed]
    unreserved += _unreserved(Q(pk__in=sorted(changed)))
    if kept.fingerprint[1] != fingerprint[1]:  # slices moved: pools may have gone or come
        in_missing = _pool_leaks()
    else:
        in_missing = [pair for pair in kept.in_missing_pools if pair[1] not in changed]
        in_missing += _pool_leaks(Q(claim_id__in=sorted(changed)))
    reserved = [
        entry for entry in kept.reserved if entry[1] not in changed and entry[2] not in named
    ]
    owned: list[tuple[Leak, int]] = list(kept.owned)
    loose = kept.loose_owners - changed
    if fingerprint[3]:  # pods are known
        near_pods = reduce(or_, (Q(claim__namespace=ns, name=name) for ns, name in named), nothing)
        found = list(_reservation_leaks(near_pods | Q(claim_id__in=sorted(changed))))
        owners = reduce(or_, (Q(namespace=ns, owner_pod=name) for ns, name in named), nothing)
        checked, owned_found, loose = _owner_leaks(owners | Q(pk__in=sorted(changed)), loose)
        owned = [pair for pair in owned if pair[1] not in checked]
        with_devices = _with_devices([(leak, claim) for leak, claim, _ in found] + owned_found)
        reserved += [
            (leak, claim, pod)
            for leak, (_, claim, pod) in zip(with_devices[: len(found)], found, strict=True)
        ]
        owned += [
            (leak, claim)
            for leak, (_, claim) in zip(with_devices[len(found) :], owned_found, strict=True)
        ]
    return _kept_from(fingerprint, unreserved, reserved, owned, in_missing, loose)


def _kept_from(
    fingerprint: tuple[Any, ...],
    unreserved: list[tuple[Leak, int]],
    reserved: list[tuple[Leak, int, PodKey]],
    owned: list[tuple[Leak, int]],
    in_missing_pools: list[tuple[Leak, int]],
    loose_owners: frozenset[int],
) -> _KeptLeaks:
    return _KeptLeaks(
        fingerprint=fingerprint,
        unreserved=tuple(leak for leak, _ in unreserved),
        others=(
            *(leak for leak, _, _ in reserved),
            *(leak for leak, _ in owned),
            *(leak for leak, _ in in_missing_pools),
        ),
        unreserved_of=tuple(unreserved),
        reserved=tuple(reserved),
        owned=tuple(owned),
        in_missing_pools=tuple(in_missing_pools),
        loose_owners=loose_owners,
    )


def _unreserved(scope: Q | None = None) -> list[tuple[Leak, int]]:
    """Allocated claims (of `scope`) reserved for nobody, with the devices they hold."""
    threshold = settings.LEAK_UNRESERVED_SECONDS
    allocated = ResourceClaim.objects.exclude(state=ClaimState.PENDING).filter(
        allocated_count__gt=0
    )
    unreserved: list[tuple[Leak, int]] = []
    unreserved_claims = allocated.exclude(Exists(Reservation.objects.filter(claim=OuterRef("pk"))))
    if scope is not None:
        unreserved_claims = unreserved_claims.filter(scope)
    for claim in unreserved_claims.only("pk", "namespace", "name", "created_at", "raw", "obj"):
        since, source = unreserved_since(claim)
        leak = Leak(
            kind="unreserved",
            namespace=claim.namespace,
            claim=claim.name,
            detail=f"allocated, reserved for nobody for over {threshold} s",
            since=since,
            since_source=source,
        )
        unreserved.append((leak, claim.pk))
    return list(zip(_with_devices(unreserved), (pk for _, pk in unreserved), strict=True))


def _read_leaks(fingerprint: tuple[Any, ...], *, first: bool, store: bool) -> _KeptLeaks:
    """Every leak read again; in a new process (`first`), those an earlier one stored at the
    same table versions, if any (`stored_leaks`). With `store`, what was read while no table
    moved is stored for the next process."""
    digest = leaks_digest(fingerprint)
    if first and digest is not None:
        stored = read_stored_leaks(digest, Leak)
        if stored is not None:
            return _kept_from(fingerprint, *stored)
    parts = _read_parts(fingerprint)
    if store and digest is not None and _fingerprint() == fingerprint:
        store_leaks(digest, parts)
    return _kept_from(fingerprint, *parts)


def _read_parts(fingerprint: tuple[Any, ...]) -> Parts:
    """Read only the columns each check needs: at 1,000 nodes, decoding every claim's and pod's
    stored objects to find a few dozen leaks took seconds."""
    reserved: list[tuple[Leak, int, PodKey]] = []
    owned: list[tuple[Leak, int]] = []
    loose: frozenset[int] = frozenset()
    if fingerprint[-1]:  # pods are known
        found = list(_reservation_leaks())
        _, owned_found, loose = _owner_leaks()
        with_devices = _with_devices([(leak, claim) for leak, claim, _ in found] + owned_found)
        reserved = [
            (leak, claim, pod)
            for leak, (_, claim, pod) in zip(with_devices[: len(found)], found, strict=True)
        ]
        owned = [
            (leak, claim)
            for leak, (_, claim) in zip(with_devices[len(found) :], owned_found, strict=True)
        ]
    return _unreserved(), reserved, owned, _pool_leaks(), loose


def _with_devices(found: list[tuple[Leak, int]]) -> list[Leak]:
    """The leaks with the devices their claims hold, read in one query."""
    held: dict[int, list[str]] = {}
    claim_ids = sorted({claim_id for _, claim_id in found})
    for part in range(0, len(claim_ids), 500):
        entries = AllocatedDevice.objects.filter(claim_id__in=claim_ids[part : part + 500])
        for claim_id, driver, pool, device in entries.order_by("pk").values_list(
            "claim_id", "driver", "pool", "device"
        ):
            held.setdefault(claim_id, []).append(f"{driver}/{pool}/{device}")
    return [replace(leak, devices=tuple(held.get(claim_id, ()))) for leak, claim_id in found]


def _reservation_leaks(scope: Q | None = None) -> Iterable[tuple[Leak, int, PodKey]]:
    # The database matches each reservation with its pod (by the unique namespace and name) and
    # returns only those whose pod is gone, another pod, or finished: a few rows instead of
    # every reservation with an IN list of every pod name (seconds at 5,000 nodes).
    pod = Pod.objects.filter(namespace=OuterRef("claim__namespace"), name=OuterRef("name"))
    suspects = (
        Reservation.objects.filter(resource="pods", api_group="")
        .filter(scope or Q())
        .annotate(
            pod_pk=Subquery(pod.values("pk")[:1]),
            pod_uid=Subquery(pod.values("uid")[:1]),
            pod_phase=Subquery(pod.values("phase")[:1]),
        )
        .filter(
            Q(pod_pk=None)
            | (~Q(consumer_uid="") & ~Q(pod_uid=F("consumer_uid")))
            | Q(pod_phase__in=FINISHED_PHASES)
        )
    )
    rows = suspects.values_list(
        "claim_id",
        "claim__namespace",
        "claim__name",
        "name",
        "consumer_uid",
        "pod_pk",
        "pod_uid",
        "pod_phase",
    )
    for claim_id, namespace, claim_name, pod_name, consumer_uid, *pod in rows:
        if pod[0] is None or (consumer_uid and pod[1] != consumer_uid):
            leak = Leak(
                kind="reserved-for-missing-pod",
                namespace=namespace,
                claim=claim_name,
                detail=f"reserved for pod {pod_name} (uid {consumer_uid}), which no longer exists",
                since=None,
                since_source="unknown (pod deletions are not recorded)",
            )
            yield leak, claim_id, (namespace, pod_name)
        elif pod[2] in FINISHED_PHASES:
            # Few pods have finished while still holding a claim: their objects are read alone.
            finished = Pod.objects.only("pk", "name", "phase", "obj").get(pk=pod[0])
            since, source = _pod_finished_at(finished)
            leak = Leak(
                kind="reserved-for-finished-pod",
                namespace=namespace,
                claim=claim_name,
                detail=f"reserved for pod {pod_name}, which has {pod[2].lower()}",
                since=since,
                since_source=source,
            )
            yield leak, claim_id, (namespace, pod_name)


def _owner_leaks(
    near: Q | None = None, loose: frozenset[int] = frozenset()
) -> tuple[set[int], list[tuple[Leak, int]], frozenset[int]]:
    """The claims whose owner pod is gone, with their pks; and the pks of the claims whose
    owners are not a single pod (`loose`: pods other than their `owner_pod` may decide them).

    With `near` (claims by namespace and owner pod), only those claims and the `loose` ones
    are checked (returned first); the JSON of every claim is not read then."""
    # The owner references alone, extracted by the database, not whole stored objects; and only
    # of the claims whose first owner is not the pod of that name and uid, found by the
    # database through the pods' unique namespace and name (a claim names its owner pod).
    pod_uid = Pod.objects.filter(namespace=OuterRef("namespace"), name=OuterRef("owner_pod"))
    claims = ResourceClaim.objects.exclude(owner_pod="").annotate(
        owner_uid=Subquery(pod_uid.values("uid")[:1]),
        # As plain text: a JSON key's own lookups would compare with JSON values.
        first_kind=Cast(KT("raw__metadata__ownerReferences__0__kind"), TextField()),
        first_uid=Cast(KT("raw__metadata__ownerReferences__0__uid"), TextField()),
    )
    # Spelled out rather than excluded: a comparison with a missing pod (NULL) is unknown,
    # and NOT unknown would drop the very claims whose owner is gone.
    not_one_pod = (
        Q(first_kind=None)
        | Q(first_uid=None)
        | ~Q(first_kind="Pod")
        | Q(raw__metadata__ownerReferences__1__kind__isnull=False)
    )
    checked: set[int] = set()
    if near is not None:
        claims = claims.filter(near | Q(pk__in=sorted(loose)))
        checked = set(claims.values_list("pk", flat=True))
    owned = list(
        claims.filter(Q(owner_uid=None) | ~Q(first_uid=F("owner_uid")) | not_one_pod).values_list(
            "pk",
            "namespace",
            "name",
            "raw__metadata__ownerReferences",
            "raw__metadata__deletionTimestamp",
        )
    )
    # Only the owners' uids are looked up: every pod of the cluster is stored.
    wanted = sorted(
        {
            str(ref.get("uid", ""))
            for *_, references, _ in owned
            for ref in (references if isinstance(references, list) else [])
            if isinstance(ref, Mapping) and ref.get("kind") == "Pod"
        }
    )
    uids: set[str] = set()
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        uids.update(Pod.objects.filter(uid__in=part).values_list("uid", flat=True))
    found: list[tuple[Leak, int]] = []
    # Every loose claim is among the suspects: a superset of the database's `not_one_pod`.
    loose_now = set(loose) if near is not None else set()
    for pk, namespace, name, references, deletion in owned:
        if not _one_pod(references):
            loose_now.add(pk)
        owners = [
            ref
            for ref in (references if isinstance(references, list) else [])
            if isinstance(ref, Mapping) and ref.get("kind") == "Pod"
        ]
        gone = [ref for ref in owners if str(ref.get("uid", "")) not in uids]
        if not gone:
            continue
        deleting = _time(deletion)
        leak = Leak(
            kind="owner-pod-gone",
            namespace=namespace,
            claim=name,
            detail=f"owned by pod {gone[0].get('name')} (uid {gone[0].get('uid')}), which no "
            "longer exists",
            since=deleting,
            since_source="deletionTimestamp"
            if deleting
            else "unknown (pod deletions are not recorded)",
        )
        found.append((leak, pk))
    return checked, found, frozenset(loose_now)


def _one_pod(references: Any) -> bool:
    """Whether the owner references are one pod with a uid (that pod alone decides)."""
    return (
        isinstance(references, list)
        and len(references) == 1
        and isinstance(references[0], Mapping)
        and references[0].get("kind") == "Pod"
        and isinstance(references[0].get("uid"), str)
    )


def _pool_leaks(scope: Q | None = None) -> list[tuple[Leak, int]]:
    """Claims (of `scope`) holding devices of pools with no current devices, with their pks."""
    present = Device.objects.filter(
        current=True, driver=OuterRef("driver"), pool_name=OuterRef("pool")
    )
    orphans = (
        AllocatedDevice.objects.filter(scope or Q())
        .exclude(Exists(present))
        .select_related("claim")
        .only("claim_id", "driver", "pool", "device", "claim__namespace", "claim__name")
        .order_by("claim__namespace", "claim__name", "driver", "pool", "device")
    )
    by_claim: dict[int, list[AllocatedDevice]] = {}
    for entry in orphans:
        by_claim.setdefault(entry.claim_id, []).append(entry)
    found = []
    for claim_id, entries in by_claim.items():
        claim = entries[0].claim
        pools = sorted({f"{e.driver}/{e.pool}" for e in entries})
        leak = Leak(
            kind="device-in-missing-pool",
            namespace=claim.namespace,
            claim=claim.name,
            detail=f"holds devices of pool {', '.join(pools)}, which no longer exists",
            since=None,
            since_source="unknown (slice deletions are not recorded)",
            devices=tuple(e.key for e in entries),
        )
        found.append((leak, claim_id))
    return found


def leak_report(
    *, now: datetime | None = None, visibility: Visibility = EVERYTHING
) -> dict[str, Any]:
    """The leaks as JSON, with counts per kind and the oldest known age per kind; only claims
    of namespaces in `visibility` are listed and counted."""
    now = now or timezone.now()
    leaks = [leak for leak in find_leaks(now=now) if visibility.allows(leak.namespace)]
    counts = dict.fromkeys(KINDS, 0)
    oldest: dict[str, float | None] = dict.fromkeys(KINDS)
    for leak in leaks:
        counts[leak.kind] += 1
        if leak.since is not None:
            age = (now - leak.since).total_seconds()
            current = oldest[leak.kind]
            oldest[leak.kind] = age if current is None else max(current, age)
    return {
        "unreserved_threshold_seconds": settings.LEAK_UNRESERVED_SECONDS,
        "pods_checked": pods_known(),
        "counts": counts,
        "oldest_age_seconds": oldest,
        "leaks": [leak.as_dict(now) for leak in leaks],
    }
