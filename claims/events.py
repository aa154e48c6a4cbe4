"""Store events.k8s.io Events about ResourceClaims and pods that use claims, bounded by count.

The watch delivers every Event of the cluster; only those whose `regarding` object is a
ResourceClaim or a Pod are kept (`keep`), and of the pods only those that use claims: an event
about a pod stored as a projection (no claims) is removed after its batch is written. A pod not
stored yet keeps its events: they usually come before the pod's own watch event, and expire.

Bounds, applied after every batch: the newest `EVENTS_PER_OBJECT` per regarding object, to the
objects that gained an event (a created event, or one now about another object: an updated
event's `count` bump, most of a cluster's event traffic, adds no row), and nothing last seen
longer ago than `EVENTS_TTL_SECONDS` (as kube-apiserver forgets events after --event-ttl, one
hour by default; a written event already past it goes with its batch, the others within
EVENTS_SWEEP_SECONDS of expiring). So the table holds at most EVENTS_PER_OBJECT rows per claim
and pod with claims, whatever the event rate.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from claims.models import Event
from claims.models import Pod as PodModel
from inventory.choices import Kind
from inventory.sync import JSON, BatchResult, KindHandler, Written, chunks, delete_row, register

# The kinds an event must be about to be kept.
REGARDING_KINDS = frozenset({"Pod", "ResourceClaim"})

__all__ = [
    "REGARDING_KINDS",
    "SWEEPS",
    "event_columns",
    "events_about",
    "register_events",
    "trim_events",
]


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def event_columns(obj: JSON) -> JSON:
    """The columns of one Event: what it is about, who said it, how often and when."""
    regarding = obj.get("regarding") or {}
    series = obj.get("series") or {}
    created = _time((obj.get("metadata") or {}).get("creationTimestamp"))
    event_time = _time(obj.get("eventTime"))
    first = _time(obj.get("deprecatedFirstTimestamp")) or event_time or created
    last = (
        _time(series.get("lastObservedTime"))
        or _time(obj.get("deprecatedLastTimestamp"))
        or event_time
        or created
    )
    count = series.get("count") or obj.get("deprecatedCount") or 1
    return {
        "event_type": str(obj.get("type") or ""),
        "reason": str(obj.get("reason") or "")[:128],
        "note": str(obj.get("note") or ""),
        "action": str(obj.get("action") or "")[:128],
        "reporting_controller": str(
            obj.get("reportingController")
            or (obj.get("deprecatedSource") or {}).get("component")
            or ""
        ),
        "reporting_instance": str(obj.get("reportingInstance") or ""),
        "regarding_kind": str(regarding.get("kind") or ""),
        "regarding_name": str(regarding.get("name") or ""),
        "regarding_uid": str(regarding.get("uid") or ""),
        "count": max(1, int(count)),
        "first_seen": first,
        "last_seen": last,
    }


def keep_event(obj: Mapping[str, Any]) -> bool:
    """Events about claims and pods; the rest of the cluster's events are not stored."""
    return str((obj.get("regarding") or {}).get("kind") or "") in REGARDING_KINDS


def _deleted(rows: QuerySet[Event], result: BatchResult) -> None:
    # Unordered: the model's default ordering made every TTL check sort the rows it found.
    pks = list(rows.order_by().values_list("pk", flat=True))
    for part in chunks(pks):
        Event.objects.filter(pk__in=part).delete()
    result.touch("events", *pks)
    result.trimmed += len(pks)


class Sweeps:
    """When the TTL sweep of the whole table last ran in this process (monotonic seconds).

    `last_seen` has no index (an index on it made every count bump rewrite all the row's
    indexes), so the sweep reads the table: it runs at most every EVENTS_SWEEP_SECONDS, while
    the events a batch writes already past the TTL go with their batch. Readers filter by the
    cutoff (`events_about`), so an expired event still stored is never shown.
    """

    def __init__(self) -> None:
        self.last: float | None = None

    def due(self, now: float) -> bool:
        if self.last is not None and now - self.last < EVENTS_SWEEP_SECONDS:
            return False
        self.last = now
        return True


# The whole table's TTL sweep runs this often at most (a minute beside the TTL's hour).
EVENTS_SWEEP_SECONDS = 60.0
SWEEPS = Sweeps()


def trim_events(
    subjects: Iterable[tuple[str, str, str]],
    result: BatchResult,
    *,
    grown: Iterable[tuple[str, str, str]] | None = None,
    written: Iterable[tuple[int, datetime | None]] = (),
    sweep: bool | None = None,
) -> None:
    """Apply the TTL; remove the events of these (namespace, kind, name) objects that are pods
    stored without claims, and bound the events of the `grown` ones (by default all of them) to
    the newest EVENTS_PER_OBJECT.

    The TTL: the `written` (pk, last seen) rows already past it go, and the whole table is swept
    when `sweep` says so (by default when SWEEPS says one is due).

    Objects are looked up by `IN` lists of namespaces and names and matched in Python: a `Q`
    per object, ORed 200 at a time, cost more to build than to run.
    """
    wanted = sorted(set(subjects))
    cutoff = timezone.now() - timedelta(seconds=settings.EVENTS_TTL_SECONDS)
    if sweep is None:
        sweep = SWEEPS.due(time.monotonic())
    if sweep:
        _deleted(Event.objects.filter(last_seen__lt=cutoff), result)
    else:
        # A naive time (a timestamp without a zone) cannot be compared: the sweep has it.
        expired = [pk for pk, seen in written if seen and timezone.is_aware(seen) and seen < cutoff]
        if expired:
            _deleted(Event.objects.filter(pk__in=expired), result)
    pods = [(namespace, name) for namespace, kind, name in wanted if kind == "Pod"]
    for part in chunks(pods):
        plain = set(
            PodModel.objects.filter(
                namespace__in={namespace for namespace, _ in part},
                name__in={name for _, name in part},
                uses_claims=False,
            ).values_list("namespace", "name")
        ) & set(part)
        if not plain:
            continue
        drop = [
            pk
            for pk, namespace, name in Event.objects.filter(
                regarding_kind="Pod",
                namespace__in={namespace for namespace, _ in plain},
                regarding_name__in={name for _, name in plain},
            ).values_list("pk", "namespace", "regarding_name")
            if (namespace, name) in plain
        ]
        _deleted(Event.objects.filter(pk__in=drop), result)
    limit = settings.EVENTS_PER_OBJECT
    for part in chunks(wanted if grown is None else sorted(set(grown))):
        keys = set(part)
        rows = (
            Event.objects.filter(
                namespace__in={subject[0] for subject in part},
                regarding_kind__in={subject[1] for subject in part},
                regarding_name__in={subject[2] for subject in part},
            )
            .order_by("namespace", "regarding_kind", "regarding_name", "-last_seen", "-pk")
            .values_list("pk", "namespace", "regarding_kind", "regarding_name")
        )
        seen: dict[tuple[str, str, str], int] = {}
        extra: list[int] = []
        for pk, *subject in rows:
            key = (subject[0], subject[1], subject[2])
            if key not in keys:
                continue
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > limit:
                extra.append(pk)
        for pks in chunks(extra):
            _deleted(Event.objects.filter(pk__in=pks), result)


def events_written(written: list[Written], result: BatchResult) -> None:
    """Count and announce written events, then keep the table within its bounds."""
    subjects = set()
    grown = set()
    seen: list[tuple[int, datetime | None]] = []
    for entry in written:
        result.upserted += 1
        result.touch("events", entry.row.pk)
        row = entry.row
        seen.append((row.pk, row.last_seen))
        subject = (row.namespace, row.regarding_kind, row.regarding_name)
        subjects.add(subject)
        stored = entry.item.stored
        if entry.created or subject != (
            stored.get("namespace"),
            stored.get("regarding_kind"),
            stored.get("regarding_name"),
        ):
            grown.add(subject)
    trim_events(subjects, result, grown=grown, written=seen)


def events_about(
    namespace: str, *, claims: Iterable[str] = (), pods: Iterable[str] = ()
) -> list[Event]:
    """The events about these claims and pods of one namespace, newest first, within the TTL
    (the table may hold a few older ones until the next batch trims it). One query."""
    about = Q(regarding_kind="ResourceClaim", regarding_name__in=list(claims)) | Q(
        regarding_kind="Pod", regarding_name__in=list(pods)
    )
    cutoff = timezone.now() - timedelta(seconds=settings.EVENTS_TTL_SECONDS)
    limit = settings.EVENTS_PER_OBJECT
    return list(
        Event.objects.filter(about, namespace=namespace, last_seen__gte=cutoff)
        .defer("raw", "obj")
        .order_by("-last_seen", "-pk")[: limit * 4]
    )


def register_events() -> None:
    """Register the Event kind with the sync."""
    register(
        KindHandler(
            Kind.EVENT,
            Event,
            event_columns,
            delete_row("events"),
            "events",
            namespaced=True,
            keep=keep_event,
            # An updated event about the same object adds no row: its object's bound holds.
            stored_fields=("namespace", "regarding_kind", "regarding_name"),
            written=events_written,
        )
    )
