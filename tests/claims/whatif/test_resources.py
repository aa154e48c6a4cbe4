"""PodRequests and PodLimits as upstream computes them, host ports, and LimitRange defaults.

The request and limit cases are those of upstream's `component-helpers/resource/helpers_test.go`
(TestPodRequestsAndLimits, TestPodResourceRequests, TestPodResourceLimits), as data: containers,
init containers (sidecars marked), overhead, status; and the expected totals.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from claims.whatif.resources import (
    amount,
    host_ports,
    is_best_effort,
    is_terminating,
    pod_limits,
    pod_requests,
    quantity_text,
    scheduler_units,
    with_limit_ranges,
    with_request_defaults,
)


def container(
    name: str = "",
    *,
    requests: dict | None = None,
    limits: dict | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"name": name, "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def exact(values: dict[str, str]) -> dict[str, Fraction]:
    return {name: amount(value) for name, value in values.items()}


# (name, spec, expected requests, expected limits): TestPodRequestsAndLimits and the
# overhead-free cases of TestPodRequestsAndLimitsWithoutOverhead (there: ExcludeOverhead).
REQUESTS_AND_LIMITS = [
    ("just-limit-no-overhead", {"containers": [container(limits={"cpu": "9"})]}, {}, {"cpu": "9"}),
    (
        "just-overhead",
        {"containers": [container()], "overhead": {"cpu": "5", "memory": "5"}},
        {"cpu": "5", "memory": "5"},
        {},
    ),
    (
        "req-and-overhead",
        {
            "containers": [container(requests={"cpu": "1", "memory": "10"})],
            "overhead": {"cpu": "5", "memory": "5"},
        },
        {"cpu": "6", "memory": "15"},
        {},
    ),
    (
        "all-req-lim-and-overhead",
        {
            "containers": [
                container(
                    requests={"cpu": "1", "memory": "10"}, limits={"cpu": "2", "memory": "12"}
                )
            ],
            "overhead": {"cpu": "5", "memory": "5"},
        },
        {"cpu": "6", "memory": "15"},
        {"cpu": "7", "memory": "17"},
    ),
    (
        "req-some-lim-and-overhead",
        {
            "containers": [container(requests={"cpu": "1", "memory": "10"}, limits={"cpu": "2"})],
            "overhead": {"cpu": "5", "memory": "5"},
        },
        {"cpu": "6", "memory": "15"},
        {"cpu": "7"},
    ),
    (
        "two container no overhead - should just be sum of containers",
        {
            "containers": [
                container(
                    requests={"cpu": "1", "memory": "5"}, limits={"cpu": "2", "memory": "10"}
                ),
                container(
                    requests={"cpu": "4", "memory": "12"}, limits={"cpu": "8", "memory": "24"}
                ),
            ]
        },
        {"cpu": "5", "memory": "17"},
        {"cpu": "10", "memory": "34"},
    ),
    (
        "two container, massive init - should just be the largest init",
        {
            "containers": [
                container(
                    requests={"cpu": "1", "memory": "5"}, limits={"cpu": "2", "memory": "10"}
                ),
                container(
                    requests={"cpu": "4", "memory": "12"}, limits={"cpu": "8", "memory": "24"}
                ),
            ],
            "initContainers": [
                container(requests={"cpu": "1", "memory": "5"}, limits={"cpu": "1", "memory": "5"}),
                container(
                    requests={"cpu": "40", "memory": "120"}, limits={"cpu": "80", "memory": "240"}
                ),
            ],
        },
        {"cpu": "40", "memory": "120"},
        {"cpu": "80", "memory": "240"},
    ),
]


@pytest.mark.parametrize(
    ("spec", "requests", "limits"),
    [case[1:] for case in REQUESTS_AND_LIMITS],
    ids=[case[0] for case in REQUESTS_AND_LIMITS],
)
def test_pod_requests_and_limits(spec: dict, requests: dict, limits: dict) -> None:
    """PodRequests adds overhead; PodLimits adds it to the limits that are set."""
    assert pod_requests(spec) == exact(requests)
    assert pod_limits(spec) == exact(limits)


# TestPodResourceRequests (spec only) and TestPodResourceLimits: the cpu the pod needs.
SIDECAR_CASES = [
    (
        "nil options, larger init container",
        [container(requests={"cpu": "4"})],
        [container(requests={"cpu": "1"})],
        "4",
    ),
    (
        "nil options, larger containers",
        [container(requests={"cpu": "2"})],
        [container(requests={"cpu": "2"}), container(requests={"cpu": "3"})],
        "5",
    ),
    (
        "restartable init container",
        [container("restartable-init-1", requests={"cpu": "1"}, sidecar=True)],
        [container("container-1", requests={"cpu": "1"})],
        "2",
    ),
    (
        "multiple restartable init containers",
        [
            container("init-1", requests={"cpu": "5"}),
            container("restartable-init-1", requests={"cpu": "1"}, sidecar=True),
            container("restartable-init-2", requests={"cpu": "2"}, sidecar=True),
            container("restartable-init-3", requests={"cpu": "3"}, sidecar=True),
        ],
        [container("container-1", requests={"cpu": "1"})],
        "7",
    ),
    (
        "multiple restartable and regular init containers",
        [
            container("init-1", requests={"cpu": "5"}),
            container("restartable-init-1", requests={"cpu": "1"}, sidecar=True),
            container("restartable-init-2", requests={"cpu": "2"}, sidecar=True),
            container("init-2", requests={"cpu": "5"}),
            container("restartable-init-3", requests={"cpu": "3"}, sidecar=True),
        ],
        [container("container-1", requests={"cpu": "1"})],
        "8",
    ),
    (
        "restartable-init, init and regular",
        [
            container("restartable-init-1", requests={"cpu": "10"}, sidecar=True),
            container("init-1", requests={"cpu": "200"}),
        ],
        [container("container-1", requests={"cpu": "100"})],
        "210",
    ),
]


@pytest.mark.parametrize(
    ("init", "containers", "cpu"),
    [case[1:] for case in SIDECAR_CASES],
    ids=[case[0] for case in SIDECAR_CASES],
)
def test_sidecars_count_like_containers_and_toward_later_init_containers(
    init: list, containers: list, cpu: str
) -> None:
    """Restartable init containers add to the sum and to every later init container's need;
    the same holds for limits."""
    spec = {"initContainers": init, "containers": containers}
    assert pod_requests(spec) == {"cpu": amount(cpu)}
    as_limits = {
        "initContainers": [
            {**c, "resources": {"limits": c["resources"]["requests"]}} for c in init
        ],
        "containers": [
            {**c, "resources": {"limits": c["resources"]["requests"]}} for c in containers
        ],
    }
    assert pod_limits(as_limits) == {"cpu": amount(cpu)}


def _status(entries: list[dict], *, infeasible: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"containerStatuses": entries}
    if infeasible:
        status["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        ]
    return status


# TestPodResourceRequests with UseStatusResources: what a running pod holds (in-place resize).
RESIZE_CASES = [
    (
        "resized, infeasible",
        {"cpu": "4"},
        _status([{"name": "c", "resources": {"requests": {"cpu": "2"}}}], infeasible=True),
        {"cpu": "2"},
    ),
    (
        "resized, infeasible & in-progress",
        {"cpu": "6"},
        _status(
            [
                {
                    "name": "c",
                    "allocatedResources": {"cpu": "4"},
                    "resources": {"requests": {"cpu": "2"}},
                }
            ],
            infeasible=True,
        ),
        {"cpu": "4"},
    ),
    (
        "resized, no resize status",
        {"cpu": "4"},
        _status([{"name": "c", "resources": {"requests": {"cpu": "2"}}}]),
        {"cpu": "4"},
    ),
    (
        "resized: per-resource 3-way maximum",
        {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"},
        _status(
            [
                {
                    "name": "c",
                    "allocatedResources": {
                        "cpu": "20m",
                        "memory": "10M",
                        "ephemeral-storage": "30G",
                    },
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"}
                    },
                }
            ]
        ),
        {"cpu": "30m", "memory": "30M", "ephemeral-storage": "30G"},
    ),
]


@pytest.mark.parametrize(
    ("requests", "status", "expected"),
    [case[1:] for case in RESIZE_CASES],
    ids=[case[0] for case in RESIZE_CASES],
)
def test_a_running_pod_counts_what_a_resize_gave_it(
    requests: dict, status: dict, expected: dict
) -> None:
    """With its status, a pod's requests are the largest of spec, allocated and actuated."""
    spec = {"containers": [container("c", requests=requests)]}
    assert pod_requests(spec, status=status) == exact(expected)


def test_aggregate_is_the_max_of_sums_not_the_sum_of_maxes() -> None:
    """Allocated 2+1 against spec 1+2: the pod needs 3, not 4 (upstream's named case)."""
    spec = {
        "containers": [
            container("c1", requests={"cpu": "1"}),
            container("c2", requests={"cpu": "2"}),
        ]
    }
    status = _status(
        [
            {"name": "c1", "allocatedResources": {"cpu": "2"}},
            {"name": "c2", "allocatedResources": {"cpu": "1"}},
        ]
    )
    assert pod_requests(spec, status=status) == {"cpu": 3}


def test_pod_level_resources_replace_the_containers_totals() -> None:
    """spec.resources sets cpu and memory for the pod; other resources stay the containers'."""
    spec = {
        "resources": {"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}},
        "containers": [
            container(
                requests={"memory": "8Mi", "ephemeral-storage": "32Mi"},
                limits={"ephemeral-storage": "64Mi"},
            )
        ],
    }
    assert pod_requests(spec) == exact({"memory": "1Mi", "ephemeral-storage": "32Mi"})
    assert pod_limits(spec) == exact({"memory": "2Mi", "ephemeral-storage": "64Mi"})


def test_scheduler_units_round_up_and_drop_what_is_not_a_resource() -> None:
    """Millicores for cpu, whole units for the rest, rounded up; unknown names dropped."""
    units = scheduler_units(
        exact({"cpu": "1.5m", "memory": "1.5", "hugepages-2Mi": "2Mi", "storage": "1"})
    )
    assert units == {"cpu": 2, "memory": 2, "hugepages-2Mi": 2 * 2**20}


def test_host_ports_of_containers_and_sidecars() -> None:
    """GetHostPorts: containers and restartable init containers; 0.0.0.0 and TCP by default."""
    spec = {
        "initContainers": [
            {"name": "init", "ports": [{"containerPort": 1, "hostPort": 1}]},
            {"name": "side", "restartPolicy": "Always", "ports": [{"hostPort": 2}]},
        ],
        "containers": [
            {
                "name": "c",
                "ports": [
                    {"containerPort": 80},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                ],
            }
        ],
    }
    assert host_ports(spec) == [("0.0.0.0", "TCP", 2), ("10.0.0.1", "UDP", 53)]


def test_limit_range_defaults_fill_only_what_is_missing() -> None:
    """Requests default to limits first; then the range's default and defaultRequest."""
    ranges = [
        {
            "spec": {
                "limits": [
                    {"type": "Pod", "max": {"cpu": "64"}},
                    {
                        "type": "Container",
                        "default": {"cpu": "2", "memory": "1Gi"},
                        "defaultRequest": {"cpu": "500m", "memory": "256Mi"},
                    },
                ]
            }
        }
    ]
    spec = {
        "containers": [
            container("bare"),
            container("limited", limits={"cpu": "1"}),
            container("asks", requests={"memory": "2Gi"}),
        ]
    }
    stored = with_limit_ranges(spec, ranges)
    resources = [c["resources"] for c in stored["containers"]]
    assert resources[0] == {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "256Mi"},
    }
    assert resources[1] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "256Mi"},
    }
    assert resources[2]["requests"] == {"memory": "2Gi", "cpu": "500m"}
    assert spec["containers"][0]["resources"] == {}, "the input is not changed"
    assert pod_requests(stored) == exact({"cpu": "2", "memory": "2560Mi"})


def test_a_limit_range_without_defaults_defaults_to_its_bounds() -> None:
    """An item with only max/min defaults limits to max and requests to the default, then min."""
    ranges = [
        {
            "spec": {
                "limits": [{"type": "Container", "max": {"cpu": "4"}, "min": {"memory": "64Mi"}}]
            }
        }
    ]
    stored = with_limit_ranges({"containers": [container("c")]}, ranges)
    assert stored["containers"][0]["resources"] == {
        "limits": {"cpu": "4"},
        "requests": {"cpu": "4", "memory": "64Mi"},
    }


def test_request_defaults_leave_stored_specs_alone() -> None:
    """A spec with every limit requested is returned as is (synced pods: no copy)."""
    spec = {"containers": [container(requests={"cpu": "1"}, limits={"cpu": "1"})]}
    assert with_request_defaults(spec) is spec
    bare = {"containers": [container(limits={"cpu": "1"})]}
    assert with_request_defaults(bare)["containers"][0]["resources"]["requests"] == {"cpu": "1"}


def test_qos_and_termination_for_quota_scopes() -> None:
    """BestEffort: no cpu or memory anywhere; Terminating: activeDeadlineSeconds >= 0."""
    assert is_best_effort({"containers": [container(requests={"example.com/dongle": "1"})]})
    assert not is_best_effort({"containers": [container(limits={"memory": "1Gi"})]})
    assert not is_best_effort({"resources": {"requests": {"cpu": "1"}}, "containers": []})
    assert is_terminating({"activeDeadlineSeconds": 0})
    assert not is_terminating({})


def test_quantity_text_says_amounts_the_api_server_way() -> None:
    """Millis for fractions of a unit, binary suffixes for memory-like resources."""
    assert quantity_text(Fraction(1, 2), "requests.cpu") == "500m"
    assert quantity_text(Fraction(2 * 2**30), "requests.memory") == "2Gi"
    assert quantity_text(Fraction(3000), "requests.cpu") == "3k"
    assert quantity_text(Fraction(7), "count/pods") == "7"
