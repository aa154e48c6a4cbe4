"""`pod_request_units`: the scheduler's units of a pod's requests summed in integers, identical
to rounding the exact (Fraction) `pod_requests` up, with each quantity text read once."""

from __future__ import annotations

import random
from typing import Any

import pytest

from claims.whatif import resources
from claims.whatif.resources import (
    ResourceError,
    pod_request_units,
    pod_requests,
    scheduler_units,
)

# Whole in their unit (millicores, bytes) and not: "0.0001", "1n", "1.5" (bytes) and "2.5m"
# must be summed exactly before rounding up; "x1" is no quantity.
_QUANTITIES = (
    "0",
    "1",
    "2",
    "100m",
    "250m",
    "1500m",
    "0.5",
    "1.25",
    "2.5m",
    "0.0001",
    "1n",
    "3e2",
    "1k",
    "1Ki",
    "500Mi",
    "2Gi",
    "1.5",
    "1.5Gi",
    "-1",
    4,
    0.5,
)
_NAMES = (
    "cpu",
    "memory",
    "ephemeral-storage",
    "pods",
    "nvidia.com/gpu",
    "hugepages-2Mi",
    "attachable-volumes-csi-x",
    "unprefixed",
)


def _resource_list(rng: random.Random, *, whole: bool) -> dict[str, Any]:
    names = rng.sample(_NAMES, rng.randint(0, 4))
    if whole:
        # Only values whole in every unit: the integer path must take these pods.
        return {name: rng.choice(("0", "1", "2", "3e2", "1k", "2Gi", "500Mi", 4)) for name in names}
    return {name: rng.choice(_QUANTITIES) for name in names}


def _container(rng: random.Random, index: int, *, whole: bool, init: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"c{index}"}
    if rng.random() < 0.8:
        out["resources"] = {"requests": _resource_list(rng, whole=whole)}
    if init and rng.random() < 0.4:
        out["restartPolicy"] = "Always"
    return out


def random_pod(rng: random.Random, *, whole: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, status) of a pod with containers, init containers (some sidecars), overhead,
    pod-level requests and, now and then, an in-place resize in its status."""
    containers = [_container(rng, i, whole=whole, init=False) for i in range(rng.randint(0, 3))]
    inits = [_container(rng, 10 + i, whole=whole, init=True) for i in range(rng.randint(0, 4))]
    spec: dict[str, Any] = {"containers": containers, "initContainers": inits}
    if rng.random() < 0.3:
        spec["overhead"] = _resource_list(rng, whole=whole)
    if rng.random() < 0.2:
        spec["resources"] = {"requests": _resource_list(rng, whole=whole)}
    status: dict[str, Any] = {"phase": "Running"}
    if rng.random() < 0.3 and containers + inits:
        entries = []
        for c in rng.sample(containers + inits, rng.randint(1, len(containers + inits))):
            entry: dict[str, Any] = {"name": c["name"]}
            if rng.random() < 0.6:
                entry["allocatedResources"] = _resource_list(rng, whole=whole)
            if rng.random() < 0.6:
                entry["resources"] = {"requests": _resource_list(rng, whole=whole)}
            entries.append(entry)
        status["containerStatuses"] = entries
        if rng.random() < 0.3:
            reason = rng.choice(("Infeasible", "Deferred"))
            status["conditions"] = [{"type": "PodResizePending", "reason": reason}]
    return spec, status


@pytest.mark.parametrize("whole", [True, False])
def test_random_pods_match_the_exact_computation(whole: bool) -> None:
    """Over 3,000 random pods, the integer units equal the rounded-up exact requests."""
    rng = random.Random(25 + whole)
    checked = 0
    for _ in range(3000):
        spec, status = random_pod(rng, whole=whole)
        expected = scheduler_units(pod_requests(spec, status=status))
        assert pod_request_units(spec, status=status) == expected, (spec, status)
        assert pod_request_units(spec) == scheduler_units(pod_requests(spec))
        checked += bool(expected)
    assert checked > 1000  # most pods ask for something: the comparison is not of empty maps


def test_whole_pods_take_the_integer_path_and_read_each_text_once() -> None:
    """Pods of whole quantities never reach the exact (Fraction) path, and a text is parsed
    once however many pods carry it."""
    rng = random.Random(7)
    pods = [random_pod(rng, whole=True) for _ in range(2000)]
    resources._whole_units.cache_clear()
    for spec, status in pods:
        # The integer reading alone succeeds (raises no _NotWhole): no Fraction sum needed.
        units = resources._requests(spec, status, resources._units)
        assert {k: v for k, v in units.items() if v} == pod_request_units(spec, status=status)
    info = resources._whole_units.cache_info()
    # 8 distinct texts: "0", "1", "2", "3e2", "1k", "2Gi", "500Mi" and the number 4 as "4".
    assert info.misses == 8
    assert info.hits > 10_000


def test_fractions_are_summed_before_rounding_up() -> None:
    """Two containers asking 0.0001 cpu need 1 millicore (ceil of the sum), not 2; 1.5 bytes
    twice is 3 bytes."""
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "0.0001", "memory": "1.5"}}},
            {"name": "b", "resources": {"requests": {"cpu": "0.0001", "memory": "1.5"}}},
        ]
    }
    assert pod_request_units(spec) == {"cpu": 1, "memory": 3}


def test_init_containers_keep_upstreams_max_rule() -> None:
    """max(sum of containers and sidecars, each init container plus the sidecars before it)
    plus overhead, in integers."""
    spec = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # Sum 1.5 cpu; the setup init container needs 2 + the 1 of the sidecar before it = 3.
    assert pod_request_units(spec) == {"cpu": 3100, "memory": 2**30}


def test_unreadable_quantity_names_the_field() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "x1"}}}]}
    with pytest.raises(ResourceError) as caught:
        pod_request_units(spec)
    assert caught.value.path == "spec.containers[0].resources.requests[nvidia.com/gpu]"
    # A name the scheduler does not count is still read (as the exact path does).
    spec = {"containers": [{"name": "a", "resources": {"requests": {"unprefixed": "x1"}}}]}
    with pytest.raises(ResourceError):
        pod_request_units(spec)
