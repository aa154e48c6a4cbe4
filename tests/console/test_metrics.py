"""Tests for /metrics: values against the demo cluster, sync lag, what-if histogram, access."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from console.metrics import as_samples, render_metrics
from dashboard import timings
from dashboard.timings import observe_whatif_seconds
from inventory.models import SkippedObject, SyncState
from tests.console import expected
from tests.paths import ROOT, free_port

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
NOW = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)


def scrape(now: datetime = NOW) -> Samples:
    return dict(as_samples(render_metrics(now=now).decode()))


def series(samples: Samples, name: str) -> dict[tuple[str, ...], float]:
    """{label values in label-name order: value} of one sample name."""
    return {
        tuple(value for _, value in labels): value
        for (sample, labels), value in samples.items()
        if sample == name
    }


@pytest.fixture
def per_pool(settings) -> None:
    """Scrapes export the per-pool series (DASHBOARD_METRICS_PER_POOL=1)."""
    settings.METRICS_PER_POOL = True


def test_device_counts_per_pool_match_the_objects(demo_cluster, per_pool) -> None:
    """Devices total/allocated/free/tainted per driver and pool equal the hand computation."""
    samples = scrape()
    want = expected.pool_devices(demo_cluster)
    for state, name in [
        ("total", "dra_dashboard_devices"),
        ("allocated", "dra_dashboard_devices_allocated"),
        ("free", "dra_dashboard_devices_free"),
        ("tainted", "dra_dashboard_devices_tainted"),
    ]:
        assert series(samples, name) == {key: counts[state] for key, counts in want.items()}


def test_device_counts_per_class_by_every_selector(demo_cluster) -> None:
    """Every class gets the counts of the devices all its selectors match, CEL ones included."""
    samples = series(scrape(), "dra_dashboard_class_devices")
    want = {
        (name, state): count
        for name, counts in expected.class_devices(demo_cluster).items()
        for state, count in counts.items()
    }
    assert samples == want
    assert ("big-gpu", "total") in samples


def test_pending_claims_per_device_class(demo_cluster) -> None:
    """Pending claims count for each class they name; every class has a series."""
    samples = series(scrape(), "dra_dashboard_class_pending_claims")
    want = expected.class_pending_claims(demo_cluster)
    assert samples == {(name,): float(count) for name, count in want.items()}
    assert any(want.values()) and not all(want.values())


def test_shared_counters_capacity_and_consumption(demo_cluster, per_pool) -> None:
    """sharedCounters capacity and what allocated devices consume, per pool and counter."""
    samples = scrape()
    want = expected.counters(demo_cluster)
    assert series(samples, "dra_dashboard_counter_capacity") == {
        (counter, driver, pool): float(capacity)
        for (driver, pool, counter), (capacity, _) in want.items()
    }
    assert series(samples, "dra_dashboard_counter_consumed") == {
        (counter, driver, pool): float(consumed)
        for (driver, pool, counter), (_, consumed) in want.items()
    }


def test_consumable_capacity_used_versus_capacity(demo_cluster, per_pool) -> None:
    """Consumable capacity of shareable devices and the consumedCapacity of their allocations."""
    samples = scrape()
    want = expected.consumable_capacity(demo_cluster)
    assert series(samples, "dra_dashboard_capacity") == {
        (name, driver, pool): float(capacity)
        for (driver, pool, name), (capacity, _) in want.items()
    }
    assert series(samples, "dra_dashboard_capacity_consumed") == {
        (name, driver, pool): float(consumed)
        for (driver, pool, name), (_, consumed) in want.items()
    }


def test_pending_claims_and_oldest_age_per_namespace(demo_cluster) -> None:
    """Pending claims per namespace, the age of the oldest one at a fixed time, and its name."""
    samples = scrape(NOW)
    want = expected.pending_claims(demo_cluster, NOW)
    assert series(samples, "dra_dashboard_pending_claims") == {
        (namespace,): float(count) for namespace, (count, _, _) in want.items()
    }
    # Label values in label-name order: claim, namespace.
    assert series(samples, "dra_dashboard_pending_claim_oldest_age_seconds") == {
        (claim, namespace): age for namespace, (_, age, claim) in want.items()
    }


def test_sync_lag_rate_events_and_skipped_per_kind(db) -> None:
    """Per kind: seconds since the last event and heartbeat, events/s, events, skipped objects."""
    SyncState.objects.create(
        kind="ResourceSlice",
        served=True,
        last_event_at=NOW - timedelta(seconds=42),
        heartbeat_at=NOW - timedelta(seconds=3),
        events_per_second=12.5,
        events_total=9000,
        object_count=2103,
        resource_version="9000",
        cursor_valid=True,
        verified_at=NOW - timedelta(seconds=60),
    )
    SyncState.objects.create(
        kind="ResourceClass",
        served=False,
        heartbeat_at=NOW - timedelta(seconds=7),
        last_error="the server does not serve resource.k8s.io/v1alpha2",
        last_error_at=NOW - timedelta(seconds=7),
    )
    for name in ("a", "b"):
        SkippedObject.objects.create(kind="ResourceSlice", name=name, error="bad")
    samples = scrape(NOW)
    assert series(samples, "dra_dashboard_sync_last_event_age_seconds") == {
        ("ResourceSlice",): 42.0
    }
    assert series(samples, "dra_dashboard_sync_heartbeat_age_seconds") == {
        ("ResourceClass",): 7.0,
        ("ResourceSlice",): 3.0,
    }
    assert series(samples, "dra_dashboard_sync_events_per_second") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 12.5,
    }
    assert series(samples, "dra_dashboard_sync_events_total") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 9000.0,
    }
    assert series(samples, "dra_dashboard_sync_skipped_objects") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 2.0,
    }
    assert series(samples, "dra_dashboard_sync_objects")[("ResourceSlice",)] == 2103.0
    assert series(samples, "dra_dashboard_sync_served") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 1.0,
    }
    # A kind the cluster does not serve is neutral, even with an old error recorded against it.
    assert series(samples, "dra_dashboard_sync_error") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 0.0,
    }
    assert series(samples, "dra_dashboard_sync_stale") == {
        ("ResourceClass",): 0.0,
        ("ResourceSlice",): 0.0,
    }
    assert series(samples, "dra_dashboard_sync_verified_age_seconds") == {("ResourceSlice",): 60.0}


def test_sync_stale_and_error_for_served_kinds(db) -> None:
    """A served kind whose cursor is not valid is stale; a failed attempt is an error."""
    SyncState.objects.create(kind="Node", served=True, resource_version="5", cursor_valid=False)
    SyncState.objects.create(
        kind="Pod",
        served=True,
        resource_version="7",
        cursor_valid=True,
        verified_at=NOW - timedelta(hours=1),
        last_error="connection refused",
        last_error_at=NOW - timedelta(seconds=5),
    )
    samples = scrape(NOW)
    assert series(samples, "dra_dashboard_sync_stale") == {("Node",): 1.0, ("Pod",): 1.0}
    assert series(samples, "dra_dashboard_sync_error") == {("Node",): 0.0, ("Pod",): 1.0}


def histogram(samples: Samples) -> tuple[dict[str, float], float, float]:
    buckets = {
        dict(labels)["le"]: value
        for (name, labels), value in samples.items()
        if name == "dra_dashboard_whatif_seconds_bucket"
    }
    return (
        buckets,
        samples[("dra_dashboard_whatif_seconds_count", ())],
        samples[("dra_dashboard_whatif_seconds_sum", ())],
    )


def cumulative(observed: list[float], bounds: list[str]) -> dict[str, float]:
    return {le: float(sum(1 for v in observed if v <= float(le))) for le in bounds}


def test_whatif_histogram_in_process(db) -> None:
    """Observations land in cumulative buckets, with count and sum, without Redis."""
    observed = [0.003, 0.2, 0.2, 7.0]
    for value in observed:
        observe_whatif_seconds(value)
    buckets, count, total = histogram(scrape())
    assert buckets == cumulative(observed, list(buckets))
    assert buckets["+Inf"] == 4.0
    assert count == 4.0
    assert total == pytest.approx(sum(observed))


def test_whatif_histogram_ignores_bad_values(db, caplog) -> None:
    """Negative, NaN and non-numeric durations are logged and ignored, never raised."""
    for value in (-1.0, float("nan"), "slow"):
        observe_whatif_seconds(value)  # type: ignore[arg-type]
    _, count, _ = histogram(scrape())
    assert count == 0.0
    assert len([r for r in caplog.records if r.name == "dashboard.timings"]) == 3


def test_whatif_histogram_is_shared_across_processes_through_redis(
    db, settings, redis_server
) -> None:
    """With REDIS_URL, an observation made by another process shows in this process's scrape."""
    settings.REDIS_URL = redis_server
    timings.reset_whatif_histogram()
    observe_whatif_seconds(0.01)
    env = {
        **os.environ,
        "DASHBOARD_REDIS_URL": redis_server,
        "DASHBOARD_SECRET_KEY": "test-only-secret-key-never-used-outside-the-test-suite",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    }
    code = (
        "import django; django.setup(); "
        "from dashboard.timings import observe_whatif_seconds; observe_whatif_seconds(1.5)"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT)
    buckets, count, total = histogram(scrape())
    assert count == 2.0
    assert total == pytest.approx(1.51)
    assert buckets == cumulative([0.01, 1.5], list(buckets))
    assert timings._local.snapshot()[0] == [0] * len(timings.WHATIF_BUCKETS)


def test_whatif_histogram_keeps_observations_when_redis_is_down(db, settings) -> None:
    """If the configured Redis is unreachable, observations stay in the process and are exported."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    observe_whatif_seconds(0.3)
    _, count, total = histogram(scrape())
    assert count == 1.0
    assert total == pytest.approx(0.3)


def test_metrics_endpoint_refuses_anonymous_by_default(db) -> None:
    """Without a token, a user or PUBLIC_READ, /metrics answers 401 with a Bearer challenge."""
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"dra_dashboard_" not in response.content


def test_metrics_endpoint_public_with_public_read(db, settings) -> None:
    """With PUBLIC_READ on and no METRICS_TOKEN, /metrics answers the exposition to anyone."""
    settings.PUBLIC_READ = True
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert b"dra_dashboard_scrape_duration_seconds" in response.content


def test_metrics_endpoint_wants_the_bearer_token_when_set(db, settings) -> None:
    """With METRICS_TOKEN set, `Authorization: Bearer <token>` gets the metrics; a wrong one 403."""
    settings.METRICS_TOKEN = "s3cret-token"
    client = Client()
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret-token").status_code == 401
    good = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert good.status_code == 200
    assert b"dra_dashboard_class_units" in good.content


def test_metrics_wrong_bearer_is_refused_even_with_public_read(db, settings) -> None:
    """A bearer token that matches nothing is 403, with or without a configured token."""
    settings.PUBLIC_READ = True
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer guess").status_code == 403
    settings.METRICS_TOKEN = "s3cret-token"
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer guess").status_code == 403


def test_metrics_placeholder_token_opens_nothing(db, settings) -> None:
    """The CHANGE-ME placeholder from the examples never matches, even when presented verbatim."""
    settings.METRICS_TOKEN = "CHANGE-ME-metrics-token"
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer CHANGE-ME-metrics-token")
    assert response.status_code == 403


def test_metrics_for_a_signed_in_session_user(db) -> None:
    """A user signed in through the session reads /metrics without any token."""
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_user("metrics-viewer", password="x" * 12))
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"dra_dashboard_scrape_duration_seconds" in response.content


def test_metrics_for_a_drf_token_user_and_not_for_a_bad_token(db) -> None:
    """`Authorization: Token <key>` of an active user reads /metrics; an unknown key gets 401."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user("metrics-robot")
    key = Token.objects.create(user=user).key
    client = Client()
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Token not-a-key").status_code == 401
    user.is_active = False
    user.save()
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


def test_scrape_query_count_does_not_grow_with_the_cluster(demo_cluster, per_pool) -> None:
    """The scrape is grouped queries: ten more pools and claims add no query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inventory.sync import upsert_events

    with CaptureQueriesContext(connection) as small:
        render_metrics(now=NOW)
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"extra-{i}", "uid": f"uid-extra-{i}"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": f"node-x{i}",
                "pool": {"name": f"node-x{i}", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
            },
        }
        for i in range(10)
    ]
    claims = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"extra-{i}", "namespace": f"ns-{i}", "uid": f"uid-c-{i}"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}
            },
        }
        for i in range(10)
    ]
    upsert_events("ResourceSlice", [(o, None) for o in slices], publish=False)
    upsert_events("ResourceClaim", [(o, None) for o in claims], publish=False)
    with CaptureQueriesContext(connection) as large:
        samples = scrape()
    assert len(series(samples, "dra_dashboard_devices")) == 13
    # 13 for the device, counter, claim and sync families, 20 for pool status (its refined
    # states with pods' health reports, partition and shareable summaries), 5 for leaks, 5 for
    # classes (the membership's fingerprint, the membership itself since slices changed, holds
    # and taints, pending claims per class), three more while the membership and units are
    # brought up to date after the slices changed.
    # The first scrape reads every pod's health report; the second follows the change instead
    # (the claims written since: one query either way, whatever their number). The first
    # scrape of a process also reads the membership outcomes an earlier one stored.
    assert len(large) - 1 <= len(small) <= 55  # PostgreSQL takes a few more than SQLite


def test_scrape_without_per_pool_series_does_not_grow_with_the_pools(demo_cluster) -> None:
    """By default no series has a pool label, and ten more pools add no sample and no query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inventory.sync import upsert_events

    with CaptureQueriesContext(connection) as small:
        before = render_metrics(now=NOW)
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"more-{i}", "uid": f"uid-more-{i}"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": f"node-m{i}",
                "pool": {"name": f"node-m{i}", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
            },
        }
        for i in range(10)
    ]
    upsert_events("ResourceSlice", [(o, None) for o in slices], publish=False)
    with CaptureQueriesContext(connection) as large:
        after = render_metrics(now=NOW)
    samples = as_samples(after.decode())
    assert not [key for key in samples if "pool" in dict(key[1])]
    assert set(as_samples(before.decode())) == set(samples)
    # Only the numbers change (and the scrape duration's digits): the same lines, within bytes.
    assert abs(len(after) - len(before)) < 64
    # After the slices changed, the leaks and holds follow the change (fewer queries than the
    # first scrape's reading of everything); never more.
    assert len(large) <= len(small) <= 25
    assert series(samples, "dra_dashboard_class_devices")[("gpu.example.com", "total")] == (
        series(as_samples(before.decode()), "dra_dashboard_class_devices")[
            ("gpu.example.com", "total")
        ]
        + 20
    )


def test_pool_status_metrics_are_the_api_numbers(demo_cluster, api, per_pool) -> None:
    """dra_dashboard_pool_status_devices carries the counts of GET /api/inventory/pool-status/."""
    samples = series(scrape(), "dra_dashboard_pool_status_devices")
    body = api.get("/api/inventory/pool-status/", {"limit": 1000}).json()
    fields = {
        "total": "totalDevices",
        "allocated": "allocatedDevices",
        "available": "availableDevices",
        "unavailable": "unavailableDevices",
    }
    expected_samples = {
        (pool["driver"], pool["poolName"], state): float(pool[field])
        for pool in body["status"]["pools"]
        for state, field in fields.items()
        if field in pool
    }
    assert expected_samples and samples == expected_samples


def test_every_metric_has_the_prefix(demo_cluster) -> None:
    """Every exported sample name starts with dra_dashboard_."""
    assert all(name.startswith("dra_dashboard_") for name, _ in scrape())


def test_bad_quantity_is_left_out_not_fatal(demo_cluster, caplog, per_pool) -> None:
    """A malformed counter quantity drops that value with one warning; the scrape still works."""
    from inventory.models import CounterSet

    counter_set = CounterSet.objects.get(name="gpu-1-counters")
    counter_set.counters = {"memory": {"value": "lots"}, "multiprocessors": {"value": "66"}}
    counter_set.save()
    samples = series(scrape(), "dra_dashboard_counter_capacity")
    want = expected.counters(demo_cluster)
    memory = want[("gpu.example.com", "node-a", "memory")][0] - expected.quantity("40Gi")
    assert samples[("memory", "gpu.example.com", "node-a")] == float(memory)
    warnings = [r.getMessage() for r in caplog.records if r.name == "console.metrics"]
    assert warnings == [
        "metrics counters: 1 bad quantities left out "
        "(gpu.example.com/node-a/gpu-1-counters: 'lots')"
    ]


def test_device_taint_with_effect_none_is_not_tainted(demo_cluster, per_pool) -> None:
    """A device whose only taint has effect None counts as free, like a DeviceTaintRule's None."""
    from inventory.sync import upsert_events

    extra = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-c-gpu", "uid": "uid-slice-c"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-c",
            "pool": {"name": "node-c", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "taints": [{"key": "example.com/note", "effect": "None"}]}
            ],
        },
    }
    upsert_events("ResourceSlice", [(extra, None)], publish=False)
    want = expected.pool_devices([*demo_cluster, extra])[("gpu.example.com", "node-c")]
    samples = scrape()
    assert (
        series(samples, "dra_dashboard_devices_free")[("gpu.example.com", "node-c")] == want["free"]
    )
