"""`generate_demo_cluster`: a realistic, internally consistent DRA cluster from (nodes, seed).

Out of every ten nodes two are MIG-partitioned H100 machines, three plain H100, four A100 and
one CPU-only; every node has a NIC pool, zone-a can reach a network-attached fabric pool and
zone-b sees a fabric pool that is incomplete. Workloads are placed node by node, their claims
allocated by the real allocator, until about half of each node's GPUs are in use; then come
pending pods, claims allocated without a pod yet, and adminAccess monitors. Last, ordinary pods
without claims (web, api, cache, ...) fill each Ready node's cpu to a drawn share, and most
nodes run an ingress proxy binding host port 443, each placed only where the scheduler's
NodeResourcesFit and NodePorts would place it. At 1,000 nodes that is about 20,000 devices and
4,000 claims.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from claims.whatif.nodefit import NodeUsage, node_allocatable
from demo.catalog import (
    ADMIN_CLAIM_SPEC,
    ADMIN_NAMESPACE,
    ADMIN_TEMPLATE,
    CLAIM_SPECS,
    DEVICE_CLASSES,
    GPU_DRIVER,
    INGRESS,
    INGRESS_APP,
    NAMESPACES,
    SERVICE_APPS,
    WORKLOAD_NAMESPACES,
    ZONES,
    DemoError,
    at,
    new_uid,
)
from demo.operations import ClaimPlan, Operations
from demo.state import ClusterState, ObjKey
from demo.topology import (
    KIND_PATTERN,
    NODE_KINDS,
    fabric_slices,
    gpu_slices,
    nic_slice,
    node_name,
    node_object,
)
from demo.workloads import (
    device_class_object,
    namespace_object,
    quota_object,
    taint_rule_object,
    template_object,
)

DAY = 86400.0
FABRIC_ZONE = "zone-a"
INCOMPLETE_ZONE = "zone-b"

# app -> (namespaces it runs in, the claims of its pod)
WORKLOADS: dict[str, tuple[tuple[str, ...], list[ClaimPlan]]] = {
    "inference": (("inference", "team-b"), [("gpu", "template", "single-gpu")]),
    "trainer": (
        ("ml-training", "team-a"),
        [("gpus", "template", "gpu-pair"), ("net", "template", "nic-10g")],
    ),
    "finetune": (("ml-training",), [("gpus", "claim", "h100-quad")]),
    "flex": (("team-a", "team-b"), [("gpu", "template", "gpu-flex")]),
    "notebook": (("team-a", "team-b"), [("mig", "template", "mig-1g")]),
    "etl": (("team-b", "team-a"), [("net", "template", "nic-25g")]),
    "allreduce": (
        ("ml-training",),
        [("gpu", "template", "single-gpu"), ("link", "template", "fabric-link")],
    ),
    "recent": (("team-a",), [("gpu", "template", "gpu-recent-driver")]),
    "shared": (("inference",), [("gpu", "claim", "single-gpu")]),
    "batch": (("team-b", "ml-training"), [("gpus", "claim", "h100-octet")]),
    "gpu-monitor": ((ADMIN_NAMESPACE,), [("gpus", "template", ADMIN_TEMPLATE)]),
}

# Relative odds of each app per node kind while filling a node.
MIX: dict[str, dict[str, float]] = {
    "h100": {
        "inference": 3,
        "trainer": 3,
        "finetune": 2,
        "flex": 1,
        "recent": 1,
        "shared": 1,
        "etl": 0.5,
        "allreduce": 0.7,
    },
    "h100-mig": {"inference": 3, "trainer": 2, "finetune": 1, "flex": 1, "etl": 0.5},
    "a100": {"inference": 4, "trainer": 3, "recent": 1, "shared": 1, "etl": 0.5, "allreduce": 0.7},
    "cpu": {"etl": 1},
}
SPECS: dict[str, dict[str, Any]] = {**CLAIM_SPECS, ADMIN_TEMPLATE: ADMIN_CLAIM_SPEC}


def generate_demo_cluster(*, nodes: int, seed: int) -> list[dict[str, Any]]:
    """Raw Kubernetes objects (resource.k8s.io/v1 and core/v1) of a demo cluster.

    Deterministic: the same (nodes, seed) always gives the same objects, uids included.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise DemoError(f"nodes: expected a positive integer, got {nodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DemoError(f"seed: expected an integer, got {seed!r}")
    with _collection_paused():
        return _generate(nodes=nodes, seed=seed)


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while generating.

    Generation builds tens of thousands of long-lived objects (the cluster and the allocator's
    parsed slices) and little garbage; every full collection would scan all of them again, which
    took more time than the allocation itself. Reference counting still frees what is dropped.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _generate(*, nodes: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    state = ClusterState(share_id_factory=lambda: new_uid(rng))
    ops = Operations(state, rng, clock=-30 * DAY)
    _static_objects(ops)
    kinds = _node_kinds(rng, nodes)
    _nodes_and_slices(ops, kinds)
    _fabric(ops)
    _taints(ops, kinds)
    ops.clock = -3 * DAY
    ops.spacing = 2.4 * DAY / (4 * nodes)
    for index, kind in enumerate(kinds, start=1):
        _fill_node(ops, node_name(index), kind)
    _allocated_without_pod(ops, kinds)
    _monitors(ops, kinds)
    _pending(ops, nodes)
    # Their own stream, so that every object drawn before stays what it was for a seed.
    _services(ops, kinds, rng=random.Random(f"services:{seed}"))
    _quotas(ops)
    return state.ordered_objects()


def _tick(ops: Operations) -> None:
    ops.clock += ops.rng.uniform(0.2, 1.8) * ops.spacing


def _static_objects(ops: Operations) -> None:
    rng = ops.rng
    created = at(-90 * DAY)
    for name in NAMESPACES:
        ops.emit("ADDED", namespace_object(rng=rng, name=name, created=created))
    for name in DEVICE_CLASSES:
        ops.emit("ADDED", device_class_object(rng=rng, name=name, created=at(-60 * DAY)))
    for namespace in WORKLOAD_NAMESPACES:
        for name, spec in CLAIM_SPECS.items():
            ops.emit(
                "ADDED",
                template_object(
                    rng=rng, namespace=namespace, name=name, spec=spec, created=at(-45 * DAY)
                ),
            )
    ops.emit(
        "ADDED",
        template_object(
            rng=rng,
            namespace=ADMIN_NAMESPACE,
            name=ADMIN_TEMPLATE,
            spec=ADMIN_CLAIM_SPEC,
            created=at(-45 * DAY),
        ),
    )


def _node_kinds(rng: random.Random, nodes: int) -> list[str]:
    kinds = [KIND_PATTERN[i % len(KIND_PATTERN)] for i in range(nodes)]
    rng.shuffle(kinds)
    return kinds


def _nodes_and_slices(ops: Operations, kinds: list[str]) -> None:
    rng = ops.rng
    # A few nodes have stopped reporting (one from 5 nodes up, then 2%).
    down = max(1, len(kinds) // 50) if len(kinds) >= 5 else 0
    not_ready = set(rng.sample(range(1, len(kinds) + 1), down))
    for index, kind_name in enumerate(kinds, start=1):
        name = node_name(index)
        kind = NODE_KINDS[kind_name]
        created = at(-30 * DAY + index * 60)
        zone = ZONES[rng.randrange(len(ZONES))]
        ops.emit(
            "ADDED",
            node_object(
                name=name,
                kind=kind,
                zone=zone,
                ready=index not in not_ready,
                uid=new_uid(rng),
                created=created,
                now=at(-30),
            ),
        )
        if kind.model:
            for resource_slice in gpu_slices(
                rng=rng, node=name, kind=kind, generation=1, created=created
            ):
                ops.emit("ADDED", resource_slice)
        ops.emit("ADDED", nic_slice(rng=rng, node=name, generation=1, created=created))


def _fabric(ops: Operations) -> None:
    created = at(-20 * DAY)
    for resource_slice in fabric_slices(
        rng=ops.rng, pool="fabric-rack-a", zone=FABRIC_ZONE, present=2, declared=2, created=created
    ):
        ops.emit("ADDED", resource_slice)
    # The second slice of rack b was never published: the pool stays incomplete.
    for resource_slice in fabric_slices(
        rng=ops.rng,
        pool="fabric-rack-b",
        zone=INCOMPLETE_ZONE,
        present=1,
        declared=2,
        created=created,
    ):
        ops.emit("ADDED", resource_slice)


def _taints(ops: Operations, kinds: list[str]) -> None:
    """Driver taints on a few whole GPUs, and one DeviceTaintRule for planned maintenance."""
    rng = ops.rng
    plain = [node_name(i) for i, kind in enumerate(kinds, start=1) if kind in ("h100", "a100")]
    if not plain:
        return
    chosen = rng.sample(plain, min(len(plain), 4))
    effects = [
        ("gpu.example.com/thermal", "throttled", "NoSchedule"),
        ("gpu.example.com/thermal", "throttled", "NoSchedule"),
        ("gpu.example.com/ecc-errors", "uncorrectable", "NoExecute"),
    ]
    for node, (key, value, effect) in zip(chosen, effects, strict=False):
        slice_key = next(k for k in ops.state.pool_slices[(GPU_DRIVER, node)])
        original = ops.state.objects[slice_key]
        device_index = rng.randrange(8)
        devices = [dict(device) for device in original["spec"]["devices"]]
        devices[device_index]["taints"] = [
            {"key": key, "value": value, "effect": effect, "timeAdded": at(-2 * DAY)}
        ]
        updated = {**original, "spec": {**original["spec"], "devices": devices}}
        ops.emit("MODIFIED", updated)
    if len(chosen) == 4:
        ops.emit(
            "ADDED",
            taint_rule_object(
                rng=rng, driver=GPU_DRIVER, pool=chosen[3], device="gpu-7", created=at(-DAY)
            ),
        )


def _place(ops: Operations, app: str, node: str, *, namespace: str | None = None) -> bool:
    """Create a workload and schedule it on `node`; on failure nothing is left behind."""
    namespaces, plan = WORKLOADS[app]
    namespace = namespace or ops.rng.choice(namespaces)
    mark = len(ops.events)
    pod_key, claim_keys = ops.create_workload(app=app, namespace=namespace, plan=plan, specs=SPECS)
    assert pod_key is not None
    if ops.schedule(pod_key, node, ip=ops.pod_ip()):
        _tick(ops)
        return True
    _undo(ops, mark, pod_key, claim_keys)
    return False


def _undo(ops: Operations, mark: int, pod_key: ObjKey | None, claim_keys: list[ObjKey]) -> None:
    """Forget a workload that could not be placed, as if it had never been created."""
    if pod_key is not None:
        ops.state.remove(pod_key)
    for key in claim_keys:
        claim = ops.state.objects.get(key)
        if claim is not None:
            ops.state.remove(key)
            ops.count_claim(key[1], claim, -1)
    del ops.events[mark:]


def _fill_node(ops: Operations, node: str, kind: str) -> None:
    rng = ops.rng
    mix = MIX[kind]
    apps = list(mix)
    weights = [mix[a] for a in apps]
    if kind == "cpu":
        for _ in range(rng.randint(1, 3)):
            _place(ops, "etl", node)
        return
    if kind == "h100-mig":
        for _ in range(rng.randint(1, 4)):
            _place(ops, "notebook", node)
    target = rng.choice((2, 3, 3, 4, 4, 4, 5))
    for _ in range(10):
        if ops.state.gpus_in_use(node) >= target:
            break
        app = rng.choices(apps, weights)[0]
        if _place(ops, app, node) and app == "shared" and rng.random() < 0.8:
            # A second replica reserving the same claim on the same node.
            _share_last_claim(ops, node)


def _share_last_claim(ops: Operations, node: str) -> None:
    claim = next(obj for kind, obj in reversed(ops.events) if obj["kind"] == "ResourceClaim")
    namespace = claim["metadata"]["namespace"]
    _, plan = WORKLOADS["shared"]
    pod_key, _ = ops.create_workload(
        app="shared",
        namespace=namespace,
        plan=plan,
        specs=SPECS,
        standalone={"gpu": claim["metadata"]["name"]},
    )
    assert pod_key is not None
    ops.schedule(pod_key, node, ip=ops.pod_ip())


def _gpu_nodes(ops: Operations, kinds: list[str], *, ready: bool = True) -> list[str]:
    return [
        node_name(i)
        for i, kind in enumerate(kinds, start=1)
        if kind != "cpu" and (not ready or ops.node_usable(node_name(i)))
    ]


def _allocated_without_pod(ops: Operations, kinds: list[str]) -> None:
    """Standalone claims already allocated whose pods do not exist yet."""
    rng = ops.rng
    nodes = _gpu_nodes(ops, kinds)
    rng.shuffle(nodes)
    for node in nodes[: max(1, len(kinds) // 25)]:
        template = "h100-quad" if rng.random() < 0.3 else "single-gpu"
        app = "finetune" if template == "h100-quad" else "inference"
        namespace = "ml-training" if app == "finetune" else "inference"
        mark = len(ops.events)
        _, keys = ops.create_workload(
            app=app,
            namespace=namespace,
            plan=[("gpu", "claim", template)],
            specs=SPECS,
            with_pod=False,
        )
        updated = ops.allocate_claim(keys[0], node)
        if updated is None:
            _undo(ops, mark, None, keys)
            continue
        ops.emit("MODIFIED", updated)
        _tick(ops)


def _monitors(ops: Operations, kinds: list[str]) -> None:
    """adminAccess monitors on a few random nodes where they can run.

    Their request asks for all devices, which the allocator refuses on a node that sees an
    incomplete pool (zone-b's fabric), as Kubernetes does; those nodes are skipped.
    """
    nodes = _gpu_nodes(ops, kinds)
    ops.rng.shuffle(nodes)
    wanted = max(1, len(kinds) // 250)
    for node in nodes:
        if wanted == 0:
            break
        if _place(ops, "gpu-monitor", node, namespace=ADMIN_NAMESPACE):
            wanted -= 1


def _pending(ops: Operations, nodes: int) -> None:
    """Pods still waiting: whole-node jobs nothing can hold, and pods just created."""
    rng = ops.rng
    for _ in range(max(2, nodes // 5)):
        app = rng.choice(("batch", "batch", "inference", "trainer", "flex"))
        namespaces, plan = WORKLOADS[app]
        ops.create_workload(app=app, namespace=rng.choice(namespaces), plan=plan, specs=SPECS)
        _tick(ops)


# Shares of a node's allocatable cpu its ordinary pods fill up to, drawn per node.
SERVICE_FILL = (0.3, 0.5, 0.65, 0.8, 0.9, 0.97)


def place_service(ops: Operations, app: str, node: str) -> bool:
    """Create an ordinary pod of `app` and run it on `node`; False (and nothing left) if the
    node has no room for it."""
    if app == INGRESS_APP:
        namespaces, cpu, memory, host_port = INGRESS
    else:
        namespaces, cpu, memory, host_port, _ = SERVICE_APPS[app]
    mark = len(ops.events)
    key = ops.create_service(
        app=app, namespace=ops.rng.choice(namespaces), cpu=cpu, memory=memory, host_port=host_port
    )
    if ops.schedule(key, node, ip=ops.pod_ip()):
        return True
    ops.state.remove(key)
    del ops.events[mark:]
    return False


def _services(ops: Operations, kinds: list[str], *, rng: random.Random) -> None:
    """Ordinary pods on every Ready node until its cpu is filled to a drawn share."""
    kept, ops.rng = ops.rng, rng
    apps = list(SERVICE_APPS)
    weights = [SERVICE_APPS[app][4] for app in apps]
    try:
        for index in range(1, len(kinds) + 1):
            node = node_name(index)
            if not ops.node_usable(node):
                continue
            if rng.random() < 0.8:
                place_service(ops, INGRESS_APP, node)
            allocatable = node_allocatable(ops.state.objects[("Node", "", node)]) or {}
            target = rng.choice(SERVICE_FILL) * allocatable.get("cpu", 0)
            misses = 0
            while misses < 3:
                used = (ops.node_use.get(node) or NodeUsage()).requested.get("cpu", 0)
                if used >= target:
                    break
                if place_service(ops, rng.choices(apps, weights)[0], node):
                    _tick(ops)
                else:
                    misses += 1
    finally:
        ops.rng = kept


def _quotas(ops: Operations) -> None:
    keys: set[str] = set()
    for spec in CLAIM_SPECS.values():
        keys.update(ops.claim_usage(spec))
    for namespace in WORKLOAD_NAMESPACES:
        used = ops.usage.get(namespace, {})
        hard = {key: _headroom(used.get(key, 0)) for key in keys}
        ops.emit(
            "ADDED",
            quota_object(
                rng=ops.rng, namespace=namespace, hard=hard, used=used, created=at(-40 * DAY)
            ),
        )


def _headroom(used: int) -> int:
    """A round limit about half again above what is used (at least 16)."""
    return max(16, -(-int(used * 1.5) // 10) * 10)
