"""NodeResourcesFit and NodePorts as the scheduler's plugins decide them, case by upstream case.

The tables are upstream's `noderesources/fit_test.go` (TestEnoughRequests, TestNotEnoughRequests,
TestStorageRequests) and `nodeports/node_ports_test.go` (TestNodePorts, TestFits), as data: the
pod's containers, init containers and overhead, what the pod already on the node requests, and
the reasons the plugin gives.
"""

from __future__ import annotations

from typing import Any

import pytest

from claims.whatif.nodefit import (
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    PORTS_TAKEN,
    NodeLedger,
    NodeUsage,
    PodDemand,
    status_reasons,
)
from claims.whatif.podasks import pod_asks

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"

# makeAllocatableResources(10, 20, 32, 5, 20, 5): milli-cpu, memory, pods, example.com/aaa,
# ephemeral-storage, hugepages-2Mi.
ALLOCATABLE = {
    "cpu": "10m",
    "memory": "20",
    "pods": "32",
    EXT_A: "5",
    "ephemeral-storage": "20",
    HUGE_A: "5",
}


def resources(
    cpu: int = 0, memory: int = 0, storage: int = 0, extra: dict[str, int] | None = None
) -> dict[str, str]:
    """A ResourceList like upstream's framework.Resource{MilliCPU, Memory, ...}.ResourceList()."""
    out = {"cpu": f"{cpu}m", "memory": str(memory)}
    if storage:
        out["ephemeral-storage"] = str(storage)
    out.update({name: str(v) for name, v in (extra or {}).items()})
    return out


def pod(*containers: dict[str, str], init: tuple = (), overhead: dict | None = None) -> dict:
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)
        ],
        "initContainers": [
            {"name": f"i{i}", "resources": {"requests": r}} for i, r in enumerate(init)
        ],
    }
    if overhead:
        spec["overhead"] = overhead
    return spec


def node(allocatable: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}


def existing(cpu: int = 0, memory: int = 0, extra: dict[str, int] | None = None) -> NodeUsage:
    """The one pod upstream's NodeInfo holds, in the scheduler's units."""
    requested = {"cpu": cpu, "memory": memory, **(extra or {})}
    return NodeUsage({k: v for k, v in requested.items() if v}, pods=1)


def reasons(spec: dict, usage: NodeUsage, allocatable: dict[str, str] = ALLOCATABLE) -> list[str]:
    ledger = NodeLedger({"n": usage})
    found = ledger.check(node(allocatable), pod_asks(spec).demand)
    if not found[0]:
        return []
    assert found[0] == NODE_RESOURCES_FIT
    return status_reasons(*found)


def cpu_mem(cpu: int, memory: int) -> dict[str, str]:
    return resources(cpu, memory)


# TestEnoughRequests: (name, pod, existing pod, reasons); "skip checking ignored extended
# resource" needs a custom profile's ignoredResources, which what-if does not model.
ENOUGH = [
    ("no resources requested always fits", {"containers": []}, existing(10, 20), []),
    (
        "too many resources fails",
        pod(cpu_mem(1, 1)),
        existing(10, 20),
        ["Insufficient cpu", "Insufficient memory"],
    ),
    (
        "too many resources fails due to init container cpu",
        pod(cpu_mem(1, 1), init=(cpu_mem(3, 1),)),
        existing(8, 19),
        ["Insufficient cpu"],
    ),
    (
        "too many resources fails due to highest init container cpu",
        pod(cpu_mem(1, 1), init=(cpu_mem(3, 1), cpu_mem(2, 1))),
        existing(8, 19),
        ["Insufficient cpu"],
    ),
    (
        "too many resources fails due to init container memory",
        pod(cpu_mem(1, 1), init=(cpu_mem(1, 3),)),
        existing(9, 19),
        ["Insufficient memory"],
    ),
    (
        "too many resources fails due to highest init container memory",
        pod(cpu_mem(1, 1), init=(cpu_mem(1, 3), cpu_mem(1, 2))),
        existing(9, 19),
        ["Insufficient memory"],
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        pod(cpu_mem(1, 1), init=(cpu_mem(1, 1),)),
        existing(9, 19),
        [],
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init "
        "containers",
        pod(cpu_mem(1, 1), init=(cpu_mem(1, 1), cpu_mem(1, 1))),
        existing(9, 19),
        [],
    ),
    ("both resources fit", pod(cpu_mem(1, 1)), existing(5, 5), []),
    ("one resource memory fits", pod(cpu_mem(2, 1)), existing(9, 5), ["Insufficient cpu"]),
    ("one resource cpu fits", pod(cpu_mem(1, 2)), existing(5, 19), ["Insufficient memory"]),
    ("equal edge case", pod(cpu_mem(5, 1)), existing(5, 19), []),
    (
        "equal edge case for init container",
        pod(cpu_mem(4, 1), init=(cpu_mem(5, 1),)),
        existing(5, 19),
        [],
    ),
    ("extended resource fits", pod(resources(extra={EXT_A: 1})), existing(), []),
    (
        "extended resource fits for init container",
        pod(init=(resources(extra={EXT_A: 1}),)),
        existing(),
        [],
    ),
    (
        "extended resource capacity enforced",
        pod(resources(1, 1, extra={EXT_A: 10})),
        existing(),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource capacity enforced for init container",
        pod(init=(resources(1, 1, extra={EXT_A: 10}),)),
        existing(),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource allocatable enforced",
        pod(resources(1, 1, extra={EXT_A: 1})),
        existing(extra={EXT_A: 5}),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource allocatable enforced for init container",
        pod(init=(resources(1, 1, extra={EXT_A: 1}),)),
        existing(extra={EXT_A: 5}),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        pod(resources(1, 1, extra={EXT_A: 3}), resources(1, 1, extra={EXT_A: 3})),
        existing(extra={EXT_A: 2}),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource allocatable admits multiple init containers",
        pod(init=(resources(1, 1, extra={EXT_A: 3}), resources(1, 1, extra={EXT_A: 3}))),
        existing(extra={EXT_A: 2}),
        [],
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        pod(init=(resources(1, 1, extra={EXT_A: 6}), resources(1, 1, extra={EXT_A: 3}))),
        existing(extra={EXT_A: 2}),
        [f"Insufficient {EXT_A}"],
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        pod(resources(1, 1, extra={EXT_B: 1})),
        existing(),
        [f"Insufficient {EXT_B}"],
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        pod(init=(resources(1, 1, extra={EXT_B: 1}),)),
        existing(),
        [f"Insufficient {EXT_B}"],
    ),
    (
        "kubernetes.io resource capacity enforced",
        pod(resources(1, 1, extra={K8S_A: 10})),
        existing(),
        [f"Insufficient {K8S_A}"],
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        pod(init=(resources(1, 1, extra={K8S_B: 10}),)),
        existing(),
        [f"Insufficient {K8S_B}"],
    ),
    (
        "hugepages resource capacity enforced",
        pod(resources(1, 1, extra={HUGE_A: 10})),
        existing(),
        [f"Insufficient {HUGE_A}"],
    ),
    (
        "hugepages resource capacity enforced for init container",
        pod(init=(resources(1, 1, extra={HUGE_A: 10}),)),
        existing(),
        [f"Insufficient {HUGE_A}"],
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        pod(resources(1, 1, extra={HUGE_A: 3}), resources(1, 1, extra={HUGE_A: 3})),
        existing(extra={HUGE_A: 2}),
        [f"Insufficient {HUGE_A}"],
    ),
    (
        "resources + pod overhead fits",
        pod(cpu_mem(1, 1), overhead={"cpu": "3m", "memory": "13"}),
        existing(5, 5),
        [],
    ),
    (
        "requests + overhead does not fit for memory",
        pod(cpu_mem(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        existing(5, 5),
        ["Insufficient memory"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "usage", "expected"), [c[1:] for c in ENOUGH], ids=[c[0] for c in ENOUGH]
)
def test_enough_requests(spec: dict, usage: NodeUsage, expected: list[str]) -> None:
    """The node takes the pod, or NodeResourcesFit names every resource it lacks."""
    assert reasons(spec, usage) == expected


# TestNotEnoughRequests: a node allowing one pod that already runs one.
NOT_ENOUGH = [
    (
        "even without specified resources predicate fails when there's no space for additional pod",
        {"containers": []},
        existing(10, 20),
    ),
    (
        "even if both resources fit predicate fails when there's no space for additional pod",
        pod(cpu_mem(1, 1)),
        existing(5, 5),
    ),
    (
        "even for equal edge case predicate fails when there's no space for additional pod",
        pod(cpu_mem(5, 1)),
        existing(5, 19),
    ),
    (
        "even for equal edge case predicate fails when there's no space for additional pod due to "
        "init container",
        pod(cpu_mem(5, 1), init=(cpu_mem(5, 1),)),
        existing(5, 19),
    ),
]


@pytest.mark.parametrize(
    ("spec", "usage"), [c[1:] for c in NOT_ENOUGH], ids=[c[0] for c in NOT_ENOUGH]
)
def test_not_enough_pods(spec: dict, usage: NodeUsage) -> None:
    """allocatable.pods counts the pods on the node plus this one: "Too many pods"."""
    one_pod = {"cpu": "10m", "memory": "20", "pods": "1"}
    assert reasons(spec, usage, one_pod) == ["Too many pods"]


# TestStorageRequests.
STORAGE = [
    ("due to container scratch disk", pod(cpu_mem(1, 1)), existing(10, 10), ["Insufficient cpu"]),
    ("pod fit", pod(cpu_mem(1, 1)), existing(2, 10), []),
    (
        "storage ephemeral local storage request exceeds allocatable",
        pod(resources(storage=25)),
        existing(2, 2),
        ["Insufficient ephemeral-storage"],
    ),
    ("pod fits", pod(resources(storage=10)), existing(2, 2), []),
]


@pytest.mark.parametrize(
    ("spec", "usage", "expected"), [c[1:] for c in STORAGE], ids=[c[0] for c in STORAGE]
)
def test_storage_requests(spec: dict, usage: NodeUsage, expected: list[str]) -> None:
    """ephemeral-storage is checked like cpu and memory."""
    assert reasons(spec, usage) == expected


def test_an_extended_resource_a_device_class_backs_is_left_to_dynamic_resources() -> None:
    """Not offered by the node (no device plugin): delegated to DRA; offered: checked."""
    spec = pod(resources(extra={EXT_B: 2}))
    ledger = NodeLedger({}, dra_backed=[EXT_B])
    demand = pod_asks(spec).demand
    assert ledger.check(node(ALLOCATABLE), demand) == ("", "")
    plugin = {
        "metadata": {"name": "plugin"},
        "status": {"allocatable": {**ALLOCATABLE, EXT_B: "1"}},
    }
    assert ledger.check(plugin, demand) == (NODE_RESOURCES_FIT, f"Insufficient {EXT_B}")


def test_a_node_without_allocatable_is_not_checked_and_said_so() -> None:
    """No status.allocatable: nothing is known of its capacity; the node is noted."""
    ledger = NodeLedger({})
    demand = pod_asks(pod(cpu_mem(1, 1))).demand
    assert ledger.check({"metadata": {"name": "bare"}}, demand) == ("", "")
    assert ledger.unknown_capacity == {"bare"}


def ports(*specs: str) -> dict[str, Any]:
    """Upstream's newPod(host, "PROTO/IP/PORT", ...) as a pod spec."""
    entries = []
    for text in specs:
        protocol, ip, port = text.split("/")
        entries.append({"hostPort": int(port), "hostIP": ip, "protocol": protocol})
    return {"containers": [{"name": "c", "ports": entries}]}


# TestNodePorts and TestFits: (name, wanted, on the node, conflict).
PORTS = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    (
        "second udp port conflict",
        ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
        ["UDP/127.0.0.1/8080"],
        True,
    ),
    (
        "first tcp port conflict",
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
        True,
    ),
    (
        "first tcp port conflict due to 0.0.0.0 hostIP",
        ["TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        True,
    ),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        True,
    ),
    (
        "second tcp port conflict to 0.0.0.0 hostIP",
        ["TCP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001"],
        True,
    ),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ["UDP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
        True,
    ),
    ("non-conflicting ports", ["TCP/127.0.0.1/80"], ["TCP/127.0.0.1/9090"], False),
    (
        "multiple non-conflicting ports",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"],
        False,
    ),
    ("same ports on different protocols", ["TCP/127.0.0.1/80"], ["UDP/127.0.0.1/80"], False),
    (
        "multiple ports, some conflicting",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"],
        True,
    ),
]


@pytest.mark.parametrize(
    ("wanted", "used", "conflict"), [c[1:] for c in PORTS], ids=[c[0] for c in PORTS]
)
def test_node_ports(wanted: list[str], used: list[str], conflict: bool) -> None:
    """A host port in use on the same address, or on 0.0.0.0 either side, removes the node."""
    on_node = pod_asks(ports(*used)).demand
    ledger = NodeLedger({"n": NodeUsage(ports=list(on_node.ports), pods=1)})
    found = ledger.check(node({"pods": "10"}), pod_asks(ports(*wanted)).demand)
    assert found == ((NODE_PORTS, PORTS_TAKEN) if conflict else ("", ""))


def test_sidecar_host_ports_count_and_plain_init_containers_do_not() -> None:
    """Upstream's "non-sidecar initContainer using hostPort" and "... from sidecar" cases."""
    used = NodeUsage(ports=[("0.0.0.0", "TCP", 8001)], pods=1)
    for sidecar, conflict in ((False, False), (True, True)):
        init = {"name": "i", "ports": [{"containerPort": 8001, "hostPort": 8001}]}
        if sidecar:
            init["restartPolicy"] = "Always"
        demand = pod_asks({"initContainers": [init], "containers": []}).demand
        found = NodeLedger({"n": used}).check(node({"pods": "10"}), demand)
        assert bool(found[0]) is conflict


def test_placed_pods_take_their_share_for_the_next() -> None:
    """Each pod placed on the ledger counts for the pods after it: the third 4-cpu pod finds a
    10-cpu node full."""
    ledger = NodeLedger({})
    demand = PodDemand(requests={"cpu": 4000})
    big = node({"cpu": "10", "pods": "110"})
    assert ledger.check(big, demand) == ("", "")
    ledger.place("n", demand)
    ledger.place("n", demand)
    assert ledger.check(big, demand) == (NODE_RESOURCES_FIT, "Insufficient cpu")
    assert ledger.usage("n").pods == 2
