"""Prometheus metrics at `/metrics`, read from the database at scrape time.

A scrape's size and cost follow the DeviceClasses, namespaces and kinds, not the pools: the
series per pool (devices, pool status, shared counters, consumable capacity) are exported only
with DASHBOARD_METRICS_PER_POOL=1 (at 5,000 nodes they made a scrape 8.9 MB and seconds long).

A custom Collector computes every gauge from the database when scraped (grouped queries, no loop
over rows in Python except quantity sums for counters and consumable capacity, which SQL cannot do
exactly), so any number of web processes give the same answer and a scrape through the Service is
as good as one per pod. Devices and physical units per DeviceClass are the overview's counts: CEL
runs only when slices or classes change, never per scrape; the leaks are kept until claims,
pods or slices change. While a web process computes all that after its start, its scrapes leave
out the class, unit and per-pool series (and leaks not read yet) and say `warming 1`, rather
than take seconds. The one in-process measurement, what-if latency, is exported from
`dashboard.timings`.

The alerts in `deploy/prometheus/rules.yaml` and the Grafana dashboard in `deploy/grafana/` use
these names; `tests/deploy/test_alerts.py` fails when one of theirs is not exported here.

Every name starts with `dra_dashboard_`. `/metrics` answers a scraper presenting
`Authorization: Bearer <settings.METRICS_TOKEN>`, a signed-in user (session or DRF token), or
anyone when settings.PUBLIC_READ is on; otherwise 401, or 403 for a bearer token that does not
match (a misconfigured scraper should fail loudly, not look anonymous).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import re
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from claims.choices import ClaimState
from claims.devices.availability import class_availability
from claims.devices.classes import (
    ClassMembership,
    Holds,
    class_membership,
    class_utilisation,
    held_and_tainted,
)
from claims.devices.counts import warming
from claims.leaks import KINDS as LEAK_KINDS
from claims.leaks import find_leaks, known_leaks
from claims.models import ResourceClaim
from console.gauges import PREFIX, gauge
from console.pool_metrics import per_pool_families
from dashboard.timings import WHATIF_BUCKETS, whatif_snapshot
from inventory.models import SkippedObject, SyncState
from inventory.visibility import Visibility, visibility_of_user

log = logging.getLogger(__name__)

CLASS_STATES = ("total", "allocated", "tainted", "blocked", "free")


def class_metrics(membership: ClassMembership, holds: Holds, available: list[dict]) -> list[Metric]:
    """Devices per DeviceClass by state, and pending claims that ask for each class.

    Devices are the overview's class counts (claims.devices.classes.class_utilisation): exact
    CEL membership, evaluated only when slices or classes change and kept between scrapes, with
    the holds and taints read each time. Free is availability's (`available`, from
    claims.devices.availability.class_availability): not allocated, not tainted, not blocked by
    counters, so `free` here and `class_units` never disagree on what a claim could get. A class
    whose selectors do not compile is left out.
    """
    by_class = gauge(
        "class_devices",
        "Devices per DeviceClass (every selector matches, as the scheduler decides) and state: "
        "total, allocated, tainted (not allocated, tainted NoSchedule/NoExecute), blocked (not "
        "allocated or tainted, but the counters its pool has left cannot cover it) or free (a "
        "new claim could get it now). Classes whose selectors do not compile are left out.",
        ("device_class", "state"),
    )
    classes = class_utilisation(membership=membership, holds=holds)["classes"]
    free = {
        entry["deviceClass"]: entry["devices"]["free"]
        for entry in available
        if entry["devices"] is not None
    }
    for entry in classes:
        counts = entry["devices"]
        if counts is None:
            continue
        states = {
            "total": counts["total"],
            "allocated": counts["allocated"],
            "tainted": counts["tainted"],
            "free": free[entry["name"]],
        }
        states["blocked"] = (
            states["total"] - states["allocated"] - states["tainted"] - states["free"]
        )
        for state in CLASS_STATES:
            by_class.add_metric([entry["name"], state], states[state])
    # Claims are grouped by their (sorted) list of class names: one row per distinct list.
    rows = (
        ResourceClaim.objects.filter(state=ClaimState.PENDING)
        .order_by()
        .values("device_classes")
        .annotate(n=Count("pk"))
        .values_list("device_classes", "n")
    )
    pending = {entry["name"]: 0 for entry in classes}
    for names, count in rows:
        for name in set(names or ()):
            pending[str(name)] = pending.get(str(name), 0) + count
    pending_family = gauge(
        "class_pending_claims",
        "Pending ResourceClaims naming the DeviceClass in a request or a firstAvailable "
        "alternative (a claim naming two classes counts for both). Every DeviceClass has a "
        "series, and so does a missing class a pending claim names.",
        ("device_class",),
    )
    for name in sorted(pending):
        pending_family.add_metric([name], pending[name])
    return [by_class, pending_family]


def availability_metrics(available: list[dict]) -> list[Metric]:
    """Physical units and partitions per DeviceClass: the numbers of GET
    /api/inventory/availability/ (claims.devices.availability), one definition of free."""
    units = gauge(
        "class_units",
        "Physical units per DeviceClass: a device, or the counter set partitions share (one "
        "GPU, however it is partitioned). state is total, or free (a new claim of the class "
        "could get it now: nothing on it allocated, not tainted, not blocked by counters). "
        "Classes whose selectors do not compile are left out.",
        ("device_class", "state"),
    )
    partitions = gauge(
        "class_partitions",
        "Partitions (devices that take part of a counter set) per DeviceClass and profile; "
        "state is total or free. Never part of class_units.",
        ("device_class", "profile", "state"),
    )
    for entry in available:
        counts = entry["physical"]
        if counts is None:
            continue
        for state in ("total", "free"):
            units.add_metric([entry["deviceClass"], state], counts[state])
        for partition in entry["partitions"]:
            for state in ("total", "free"):
                partitions.add_metric(
                    [entry["deviceClass"], partition["profile"], state], partition[state]
                )
    return [units, partitions]


def class_families() -> list[Metric]:
    """Device counts and physical units per class, from one read of membership and holds."""
    membership = class_membership()
    holds = held_and_tainted(membership)
    available = class_availability(membership=membership, holds=holds)
    return [*class_metrics(membership, holds, available), *availability_metrics(available)]


def leak_metrics(now: datetime, *, warming: bool = False) -> list[Metric]:
    """Leaked allocations per kind (see claims.leaks), and the oldest known age per kind; while
    the web process warms up, only leaks already read (none: no series)."""
    leaks = known_leaks(now=now) if warming else find_leaks(now=now)
    if leaks is None:
        return []
    count = gauge("leaks", "Claims holding devices for nobody, per leak kind.", ("kind",))
    oldest = gauge(
        "leak_oldest_age_seconds",
        "Age of the oldest leak of each kind whose start is known (absent when none is).",
        ("kind",),
    )
    counts = dict.fromkeys(LEAK_KINDS, 0)
    ages: dict[str, float] = {}
    for leak in leaks:
        counts[leak.kind] += 1
        if leak.since is not None:
            ages[leak.kind] = max(ages.get(leak.kind, 0.0), (now - leak.since).total_seconds())
    for kind in LEAK_KINDS:
        count.add_metric([kind], counts[kind])
        if kind in ages:
            oldest.add_metric([kind], ages[kind])
    return [count, oldest]


def claim_metrics(now: datetime) -> list[Metric]:
    """Pending claims per namespace, and the age and name of the oldest one."""

    # One read of the pending claims in namespace and age order (pending claims are few beside
    # the cluster's): a subquery per namespace for the oldest name cost half a second at 5,000
    # nodes on SQLite.
    rows = (
        ResourceClaim.objects.filter(state=ClaimState.PENDING)
        .order_by("namespace", F("created_at").asc(nulls_last=True), "name")
        .values_list("namespace", "name", "created_at")
    )
    counts: dict[str, int] = {}
    oldest_of: dict[str, tuple[str, datetime | None]] = {}
    for namespace, name, created in rows:
        counts[namespace] = counts.get(namespace, 0) + 1
        oldest_of.setdefault(namespace, (name, created))
    pending = gauge("pending_claims", "ResourceClaims not allocated yet.", ("namespace",))
    oldest = gauge(
        "pending_claim_oldest_age_seconds",
        "Age of the oldest pending ResourceClaim of the namespace (from creationTimestamp); "
        "`claim` names it.",
        ("namespace", "claim"),
    )
    for namespace, count in counts.items():
        pending.add_metric([namespace], count)
        name, created = oldest_of[namespace]
        if created is not None:
            age = max((now - created).total_seconds(), 0)
            oldest.add_metric([namespace, name], age)
    return [pending, oldest]


def sync_metrics(now: datetime) -> list[Metric]:
    """Per kind: lag since the last event and heartbeat, events/s, events, objects, skipped."""

    skipped_by_kind = dict(
        SkippedObject.objects.order_by()
        .values_list("kind")
        .annotate(n=Count("pk"))
        .values_list("kind", "n")
    )
    labels = ("kind",)
    event_age = gauge(
        "sync_last_event_age_seconds", "Seconds since the last watch event was applied.", labels
    )
    heartbeat_age = gauge(
        "sync_heartbeat_age_seconds", "Seconds since the kind's watcher last reported.", labels
    )
    rate = gauge("sync_events_per_second", "Watch events per second (recent window).", labels)
    events = CounterMetricFamily(
        PREFIX + "sync_events",
        "Watch events applied since the kind was first synced.",
        labels=labels,
    )
    objects = gauge("sync_objects", "Objects of the kind stored.", labels)
    skipped = gauge("sync_skipped_objects", "Objects that failed to normalize, skipped.", labels)
    served = gauge("sync_served", "1 when the API server serves the kind, else 0.", labels)
    failing = gauge(
        "sync_error", "1 when a served kind's last attempt failed (never for not served).", labels
    )
    stale = gauge(
        "sync_stale",
        "1 when the stored objects may differ from the cluster: cursor not valid for it, or not "
        "verified by a list or cursor check recently.",
        labels,
    )
    verified_age = gauge(
        "sync_verified_age_seconds",
        "Seconds since the server last confirmed the kind's data (list or cursor check).",
        labels,
    )
    for state in SyncState.objects.order_by("kind"):
        kind = state.kind
        last_event, beat, listed = state.last_event_at, state.heartbeat_at, state.last_list_at
        per_second, total, count = state.events_per_second, state.events_total, state.object_count
        is_served, error, error_at = state.served, state.last_error, state.last_error_at
        stale.add_metric([kind], 1 if state.is_stale(now=now) else 0)
        if state.verified_at is not None:
            verified_age.add_metric([kind], max((now - state.verified_at).total_seconds(), 0))
        if last_event is not None:
            event_age.add_metric([kind], max((now - last_event).total_seconds(), 0))
        if beat is not None:
            heartbeat_age.add_metric([kind], max((now - beat).total_seconds(), 0))
        rate.add_metric([kind], per_second)
        events.add_metric([kind], total)
        objects.add_metric([kind], count)
        skipped.add_metric([kind], skipped_by_kind.get(kind, 0))
        served.add_metric([kind], 1 if is_served else 0)
        # An error followed by a successful list or event is over.
        recovered = error_at is None or any(
            moment is not None and moment > error_at for moment in (last_event, listed)
        )
        failing.add_metric([kind], 0 if not is_served or not error or recovered else 1)
    return [
        event_age,
        heartbeat_age,
        rate,
        events,
        objects,
        skipped,
        served,
        failing,
        stale,
        verified_age,
    ]


def warming_metric(warm: bool) -> Metric:
    family = gauge(
        "warming",
        "1 while this web process computes the class membership, physical units and pool "
        "counts after its start: its scrapes meanwhile leave out the class, unit and per-pool "
        "series, and leaks not read yet.",
        (),
    )
    family.add_metric([], 1 if warm else 0)
    return family


def whatif_metrics() -> list[Metric]:
    counts, total = whatif_snapshot()
    cumulative = 0
    buckets: list[tuple[str, float]] = []
    for bound, count in zip(WHATIF_BUCKETS, counts, strict=True):
        cumulative += count
        buckets.append(("+Inf" if math.isinf(bound) else repr(bound), cumulative))
    scope = "all processes (Redis)" if settings.REDIS_URL else "this process only"
    family = HistogramMetricFamily(
        PREFIX + "whatif_seconds", f"What-if latency, {scope}.", buckets=buckets, sum_value=total
    )
    return [family]


class DashboardCollector(Collector):
    """Everything under `dra_dashboard_`, computed from the database at each scrape."""

    def __init__(self, *, now: datetime | None = None) -> None:
        # A fixed `now` makes ages reproducible in tests; scrapes use the clock.
        self.now = now

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        now = self.now or timezone.now()
        postgres = connection.vendor == "postgresql"
        # No transaction on SQLite: it may begin IMMEDIATE, holding the write lock for the scrape.
        with transaction.atomic() if postgres else contextlib.nullcontext():
            if postgres:
                # The device-state subqueries look expensive to the planner, which then spends
                # over a second JIT-compiling a query that runs in a tenth of that.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL jit = off")
            # During the web process's warm-up (claims.devices.counts.warm_counts) a scrape
            # leaves out the class and pool series rather than wait seconds for them.
            warm = warming()
            families = [
                *([] if warm else class_families()),
                # Per-pool series grow with the cluster: only when asked for.
                *(per_pool_families() if settings.METRICS_PER_POOL and not warm else []),
                *claim_metrics(now),
                *leak_metrics(now, warming=warm),
                *sync_metrics(now),
                warming_metric(warm),
            ]
        families.extend(whatif_metrics())
        duration = gauge("scrape_duration_seconds", "Time this scrape spent computing.", ())
        duration.add_metric([], time.perf_counter() - started)
        families.append(duration)
        yield from families


def render_metrics(*, now: datetime | None = None) -> bytes:
    """The exposition text of every dashboard metric, ages measured at `now` (default: now)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector(now=now))
    return generate_latest(registry)


# The placeholder a copied example carries must not open the metrics to whoever read the example.
_PLACEHOLDER_PREFIXES = ("change-me", "changeme")


def _bearer(request: HttpRequest) -> str | None:
    """The bearer token the request presents, or None without an `Authorization: Bearer` header."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    return presented.strip() if scheme.lower() == "bearer" else None


def _configured_token() -> str:
    token = str(settings.METRICS_TOKEN or "")
    if token.lower().startswith(_PLACEHOLDER_PREFIXES):
        log.warning("DASHBOARD_METRICS_TOKEN is the example placeholder; bearer tokens refused")
        return ""
    return token


def _signed_in(request: HttpRequest) -> bool | None:
    """A signed-in user by session or DRF token: True, False, or None for a bad DRF token."""
    if request.user.is_authenticated:
        return bool(request.user.is_active)
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        found = TokenAuthentication().authenticate(request)  # type: ignore[arg-type]
    except AuthenticationFailed:
        return None
    return found is not None and bool(found[0].is_active)


def _person(request: HttpRequest) -> Any:
    """The user behind the session, else behind a DRF token, else the anonymous user."""
    if request.user.is_authenticated:
        return request.user
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        found = TokenAuthentication().authenticate(request)  # type: ignore[arg-type]
    except AuthenticationFailed:
        found = None
    return found[0] if found is not None else request.user


def metrics_access(request: HttpRequest) -> int:
    """The HTTP status `/metrics` answers `request` with: 200 when allowed, else 401 or 403."""
    presented = _bearer(request)
    if presented is not None:
        token = _configured_token()
        matches = bool(token) and hmac.compare_digest(presented.encode(), token.encode())
        return 200 if matches else 403
    user = _signed_in(request)
    if user:
        return 200
    if user is None:  # a DRF token was presented and refused
        return 401
    return 200 if settings.PUBLIC_READ else 401


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format for the metrics token, a signed-in user, or anyone on PUBLIC_READ."""
    status = metrics_access(request)
    if status == 401:
        response = HttpResponse("metrics need a bearer token or a signed-in user\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if status == 403:
        return HttpResponse("metrics: the bearer token does not match\n", status=403)
    body = render_metrics()
    if _bearer(request) is None:
        # A person, not the Prometheus scrape: only the namespaces they may see.
        body = visible_series(body, visibility_of_user(_person(request)))
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


_NAMESPACE_LABEL = re.compile(rb'[{,]namespace="([^"\\]*)"')


def visible_series(text: bytes, seen: Visibility) -> bytes:
    """The exposition without the samples labelled with a namespace `seen` does not allow.

    Only the pending-claim series carry a namespace; cluster-wide figures (units, devices,
    leaks per kind) are the same for everyone, as capacity is.
    """
    if seen.everything:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        found = _NAMESPACE_LABEL.search(line) if not line.startswith(b"#") else None
        if found is None or seen.allows(found.group(1).decode()):
            kept.append(line)
    return b"".join(kept)


def as_samples(text: str) -> Mapping[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse exposition text into {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples
