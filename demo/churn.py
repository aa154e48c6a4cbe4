"""`DemoChurn`: a few realistic changes per step that keep a demo cluster consistent.

Each step draws one to four actions: create a workload (claims pending, pod waiting), start an
ordinary pod (no claim) on a node with room for it (or leave it Pending), allocate
pending claims with the real allocator on a Ready node (with the pod's reservation, as the
scheduler does), reserve an allocated claim for a new Running pod, release a pod (claims
unreserved, then deallocated or deleted), republish a node's slices with pool.generation + 1,
take a node away (its pods and claims released, slices and Node deleted) or bring one back.
resourceVersion is left to whoever serves the objects. Returned objects are copies: callers may
keep or mutate them freely.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from demo.catalog import (
    CLAIM_SPECS,
    GPU_DRIVER,
    NIC_DRIVER,
    POOL_LABEL,
    SERVICE_APPS,
    ZONE_LABEL,
    new_uid,
)
from demo.generator import SPECS, WORKLOADS
from demo.operations import Event, Operations
from demo.state import ClusterState, ObjKey
from demo.topology import DRIVER_VERSIONS, NODE_KINDS, gpu_slices, nic_slice, node_object
from demo.workloads import deallocated_claim

STEP_SECONDS = 15.0
NEW_APPS = ("inference", "trainer", "flex", "notebook", "etl", "finetune", "recent", "allreduce")
ACTIONS = {
    "create": 3.0,
    "service": 2.0,
    "allocate": 3.0,
    "reserve": 1.0,
    "release": 3.0,
    "republish": 1.0,
    "node_down": 0.3,
    "node_up": 0.6,
}
KIND_BY_POOL = {kind.pool: name for name, kind in NODE_KINDS.items()}


class DemoChurn:
    """Evolves a demo cluster one step at a time; see the module docstring for the actions."""

    def __init__(self, objects: list[dict[str, Any]], *, seed: int) -> None:
        # Not `Random(seed)`: the generator drew the cluster's uids from that stream, and the
        # churn would draw the same uids again for its new objects (a real cluster never does).
        self.rng = random.Random(f"churn:{seed}")
        rng = self.rng
        self.state = ClusterState(share_id_factory=lambda: new_uid(rng))
        for obj in objects:
            self.state.add(obj)
        self.ops = Operations(self.state, self.rng, clock=0.0)
        self.gone: dict[str, dict[str, Any]] = {}
        self.max_gone = max(1, len(self.state.by_kind["Node"]) // 20)

    def objects(self) -> list[dict[str, Any]]:
        """A copy of the current state, every object once."""
        return copy.deepcopy(self.state.ordered_objects())

    def step(self) -> list[tuple[str, dict[str, Any]]]:
        """Apply one step and return its changes in the order they happened."""
        self.ops.events = []
        self.ops.clock += STEP_SECONDS
        for _ in range(self.rng.randint(1, 4)):
            action = self.rng.choices(list(ACTIONS), list(ACTIONS.values()))[0]
            getattr(self, f"_{action}")()
        if not self.ops.events:
            self._republish()
        events: list[Event] = self.ops.events
        self.ops.events = []
        return copy.deepcopy(events)

    def _usable_nodes(self) -> list[str]:
        return [key[2] for key in self.state.keys("Node") if self.ops.node_usable(key[2])]

    def _claims_in_use(self) -> set[ObjKey]:
        used: set[ObjKey] = set()
        for key in self.state.keys("Pod"):
            used.update(self.ops.pod_claims(self.state.objects[key]))
        return used

    def _create(self) -> None:
        rng = self.rng
        if rng.random() < 0.15:
            template = rng.choice(("single-gpu", "h100-quad"))
            namespace = "ml-training" if template == "h100-quad" else "inference"
            if self.ops.quota_allows(namespace, [CLAIM_SPECS[template]]):
                app = "finetune" if template == "h100-quad" else "inference"
                self.ops.create_workload(
                    app=app,
                    namespace=namespace,
                    plan=[("gpu", "claim", template)],
                    specs=SPECS,
                    with_pod=False,
                )
            return
        app = rng.choice(NEW_APPS)
        namespaces, plan = WORKLOADS[app]
        namespace = rng.choice(namespaces)
        if self.ops.quota_allows(namespace, [SPECS[template] for _, _, template in plan]):
            self.ops.create_workload(app=app, namespace=namespace, plan=plan, specs=SPECS)

    def _service(self) -> None:
        """An ordinary pod: scheduled where it fits, else left Pending ("Insufficient cpu")."""
        app = self.rng.choices(list(SERVICE_APPS), [a[4] for a in SERVICE_APPS.values()])[0]
        namespaces, cpu, memory, host_port, _ = SERVICE_APPS[app]
        key = self.ops.create_service(
            app=app,
            namespace=self.rng.choice(namespaces),
            cpu=cpu,
            memory=memory,
            host_port=host_port,
        )
        nodes = self._usable_nodes()
        for node in self.rng.sample(nodes, min(len(nodes), 20)):
            if self.ops.schedule(key, node, ip=self.ops.pod_ip()):
                return

    def _allocate(self) -> None:
        rng = self.rng
        nodes = self._usable_nodes()
        if not nodes:
            return
        pending = [
            key
            for key in self.state.keys("Pod")
            if self.state.objects[key]["status"].get("phase") == "Pending"
        ]
        in_use = self._claims_in_use()
        podless = [
            key
            for key in self.state.keys("ResourceClaim")
            if key not in in_use and not self.state.objects[key]["status"].get("allocation")
        ]
        if podless and (not pending or rng.random() < 0.3):
            key = rng.choice(podless)
            for node in rng.sample(nodes, min(len(nodes), 40)):
                updated = self.ops.allocate_claim(key, node)
                if updated is not None:
                    self.ops.emit("MODIFIED", updated)
                    return
            return
        if pending:
            pod_key = rng.choice(pending)
            for node in rng.sample(nodes, min(len(nodes), 40)):
                if self.ops.schedule(pod_key, node, ip=self.ops.pod_ip()):
                    return

    def _reserve(self) -> None:
        """Start a Running pod on an allocated claim that no pod uses yet."""
        in_use = self._claims_in_use()
        waiting = [
            key
            for key in self.state.keys("ResourceClaim")
            if key not in in_use
            and self.state.objects[key]["status"].get("allocation")
            and not self.state.objects[key]["metadata"].get("ownerReferences")
        ]
        if not waiting:
            return
        key = self.rng.choice(waiting)
        claim = self.state.objects[key]
        node = self._node_for(claim)
        if node is None:
            return
        app = claim["metadata"]["labels"].get("app.kubernetes.io/name", "inference")
        template = claim["metadata"]["labels"].get("example.com/claim-template", "single-gpu")
        mark = len(self.ops.events)
        pod_key, _ = self.ops.create_workload(
            app=app,
            namespace=key[1],
            plan=[("gpu", "claim", template)],
            specs=SPECS,
            standalone={"gpu": key[2]},
        )
        assert pod_key is not None
        if not self.ops.schedule(pod_key, node, ip=self.ops.pod_ip()):
            self.state.remove(pod_key)
            del self.ops.events[mark:]
            return
        # The pod is created already bound and running: fold its ADDED and MODIFIED into one.
        running = self.state.objects[pod_key]
        events = self.ops.events
        events[mark:] = [
            ("ADDED", running) if obj["kind"] == "Pod" and kind == "ADDED" else (kind, obj)
            for kind, obj in events[mark:]
            if not (obj["kind"] == "Pod" and kind == "MODIFIED")
        ]
        # The claim's update must come before the pod that it is reserved for appears.
        pod_event = next(i for i in range(mark, len(events)) if events[i][1] is running)
        events.append(events.pop(pod_event))

    def _node_for(self, claim: dict[str, Any]) -> str | None:
        """A usable node the claim's allocation admits, if any."""
        nodes = [node for node in self._usable_nodes() if self.ops.claim_fits_node(claim, node)]
        return self.rng.choice(nodes) if nodes else None

    def _release(self) -> None:
        rng = self.rng
        if rng.random() < 0.15:
            in_use = self._claims_in_use()
            podless = [k for k in self.state.keys("ResourceClaim") if k not in in_use]
            if podless:
                key = rng.choice(podless)
                self.ops.delete_claim(key)
                self.ops.sync_quota(key[1])
                return
        running = [
            key
            for key in self.state.keys("Pod")
            if self.state.objects[key]["status"].get("phase") == "Running"
        ]
        if running:
            pod_key = rng.choice(running)
            self.ops.release_pod(pod_key, delete_standalone=rng.random() < 0.5)

    def _node_slices(self, node: str) -> list[ObjKey]:
        keys: list[ObjKey] = []
        for driver in (GPU_DRIVER, NIC_DRIVER):
            keys.extend(self.state.pool_slices.get((driver, node), {}))
        return keys

    def _republish(self) -> None:
        """A driver restart: the same devices, pool.generation + 1, maybe a new driverVersion."""
        nodes = [key[2] for key in self.state.keys("Node")]
        if not nodes:
            return
        node = self.rng.choice(nodes)
        drivers = [d for d in (GPU_DRIVER, NIC_DRIVER) if self.state.pool_slices.get((d, node))]
        if not drivers:
            return
        keys = list(self.state.pool_slices[(self.rng.choice(drivers), node)])
        version = self.rng.choice(DRIVER_VERSIONS) if self.rng.random() < 0.3 else None
        for key in keys:
            old = self.state.objects[key]
            spec = copy.deepcopy(old["spec"])
            spec["pool"]["generation"] += 1
            for device in spec.get("devices") or []:
                if version and "driverVersion" in device.get("attributes", {}):
                    device["attributes"]["driverVersion"] = {"version": version}
            meta = {**old["metadata"], "generation": old["metadata"].get("generation", 1) + 1}
            self.ops.emit("MODIFIED", {**old, "metadata": meta, "spec": spec})

    def _node_down(self) -> None:
        if len(self.gone) >= self.max_gone:
            return
        nodes = [key[2] for key in self.state.keys("Node")]
        if len(nodes) <= 1:
            return
        node = self.rng.choice(nodes)
        for pod_key in self.state.keys("Pod"):
            if self.state.objects[pod_key]["spec"].get("nodeName") == node:
                self.ops.release_pod(pod_key, delete_standalone=False)
        for key in self.state.keys("ResourceClaim"):
            claim = self.state.objects[key]
            allocation = claim["status"].get("allocation") or {}
            terms = allocation.get("nodeSelector", {}).get("nodeSelectorTerms", [])
            if any(node in f["values"] for t in terms for f in t.get("matchFields") or []):
                self.ops.emit("MODIFIED", deallocated_claim(claim))
        node_obj = self.state.objects[("Node", "", node)]
        generations = {}
        for key in self._node_slices(node):
            resource_slice = self.state.objects[key]
            generations[resource_slice["spec"]["driver"]] = resource_slice["spec"]["pool"][
                "generation"
            ]
            self.ops.emit("DELETED", resource_slice)
        self.ops.emit("DELETED", node_obj)
        labels = node_obj["metadata"]["labels"]
        self.gone[node] = {
            "kind": KIND_BY_POOL.get(labels.get(POOL_LABEL, ""), "cpu"),
            "zone": labels.get(ZONE_LABEL, "zone-a"),
            "generations": generations,
        }

    def _node_up(self) -> None:
        if not self.gone:
            return
        node = self.rng.choice(sorted(self.gone))
        info = self.gone.pop(node)
        kind = NODE_KINDS[info["kind"]]
        now = self.ops.now()
        self.ops.emit(
            "ADDED",
            node_object(
                name=node,
                kind=kind,
                zone=info["zone"],
                ready=True,
                uid=new_uid(self.rng),
                created=now,
                now=now,
            ),
        )
        generations = info["generations"]
        if kind.model:
            for resource_slice in gpu_slices(
                rng=self.rng,
                node=node,
                kind=kind,
                generation=generations.get(GPU_DRIVER, 0) + 1,
                created=now,
            ):
                self.ops.emit("ADDED", resource_slice)
        self.ops.emit(
            "ADDED",
            nic_slice(
                rng=self.rng,
                node=node,
                generation=generations.get(NIC_DRIVER, 0) + 1,
                created=now,
            ),
        )
