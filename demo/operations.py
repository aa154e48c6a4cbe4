"""Cluster-level actions on the demo state, each recorded as watch-style events.

Both the generator and the churn loop act through `Operations`: create a workload (claims first,
then the pod that references them) or an ordinary pod (no claim), schedule a pod (only on a node
with room for its cpu, memory and host ports, as the scheduler's NodeResourcesFit and NodePorts
decide it (`claims.whatif.nodefit`); then allocate its claims on that node and reserve them, as
the scheduler does in one status write), release a pod (delete it, unreserve, delete generated
claims, deallocate or delete standalone ones) and keep each namespace's ResourceQuota
`status.used` in step with the claims that exist, counted and admitted by the what-if's quota
rules (`claims.whatif.quota`).
"""

from __future__ import annotations

import random
from typing import Any

from claims.whatif.inputs import InputClaim
from claims.whatif.nodefit import NodeUsage, PodDemand, node_allocatable, resource_reasons
from claims.whatif.podasks import pod_asks
from claims.whatif.quota import admission, claim_usage, extended_resource_names
from claims.whatif.resources import ports_conflict
from demo.catalog import at, random_suffix
from demo.state import ClusterState, ObjKey, allocated_claim, node_is_ready
from demo.workloads import (
    claim_object,
    deallocated_claim,
    pending_status,
    pod_name,
    pod_object,
    reserved_claim,
    running_pod,
    service_pod_object,
    unreserved_claim,
)
from dralib.allocator import NodeInfo
from dralib.allocator.nodeselection import NodeSelector

Event = tuple[str, dict[str, Any]]
# (podClaimName, "template" | "claim", template name) for each claim a workload's pod uses.
ClaimPlan = tuple[str, str, str]


class Operations:
    """Applies changes to a ClusterState and records them as (type, object) events."""

    def __init__(self, state: ClusterState, rng: random.Random, *, clock: float) -> None:
        self.state = state
        self.rng = rng
        self.clock = clock
        self.events: list[Event] = []
        self.usage: dict[str, dict[str, int]] = {}
        # Mean seconds between two workloads while generating (advances `clock`).
        self.spacing = 30.0
        for key in state.keys("ResourceClaim"):
            self.count_claim(key[1], state.objects[key], +1)
        # Per node, what its bound pods request (the scheduler's NodeInfo).
        self.node_use: dict[str, NodeUsage] = {}
        # Per pod uid, what it asks of a node (a pod's spec never changes once created).
        self._demands: dict[str, PodDemand] = {}
        for key in state.keys("Pod"):
            self.count_pod(state.objects[key], +1)

    def now(self) -> str:
        return at(self.clock)

    def emit(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.state.remove(
                (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            )
        else:
            self.state.add(obj)
        self.events.append((kind, obj))

    def claim_usage(self, spec: dict[str, Any]) -> dict[str, int]:
        """What a claim with this spec adds to its namespace's quota."""
        classes = self.state.objects_of_kind("DeviceClass")
        return claim_usage(spec, extended_names=extended_resource_names(classes))

    def count_claim(self, namespace: str, claim: dict[str, Any], sign: int) -> None:
        used = self.usage.setdefault(namespace, {})
        for key, value in self.claim_usage(claim.get("spec") or {}).items():
            used[key] = used.get(key, 0) + sign * value

    def quota_allows(self, namespace: str, specs: list[dict[str, Any]]) -> bool:
        """Whether the API server would admit new claims with these specs in `namespace`."""
        quota = self.state.objects.get(("ResourceQuota", namespace, "dra-devices"))
        if quota is None:
            return True
        verdict = admission(
            [InputClaim(obj={"spec": spec}, source="demo") for spec in specs],
            namespace=namespace,
            quotas=[
                (
                    quota["metadata"]["name"],
                    quota["spec"].get("hard") or {},
                    self.usage.get(namespace, {}),
                )
            ],
            classes=self.state.objects_of_kind("DeviceClass"),
            copies=1,
        )
        return bool(verdict["allowed"])

    def sync_quota(self, namespace: str) -> None:
        quota = self.state.objects.get(("ResourceQuota", namespace, "dra-devices"))
        if quota is None:
            return
        used = self.usage.get(namespace, {})
        new_used = {key: str(used.get(key, 0)) for key in quota["status"]["hard"]}
        if new_used != quota["status"].get("used"):
            updated = {**quota, "status": {**quota["status"], "used": new_used}}
            self.emit("MODIFIED", updated)

    def count_pod(self, pod: dict[str, Any], sign: int) -> None:
        """Add (+1) or take away (-1) a bound pod's requests and host ports on its node."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        demand = self.demand(pod)
        use = self.node_use.setdefault(node, NodeUsage())
        for name, value in demand.requests.items():
            use.requested[name] = use.requested.get(name, 0) + sign * value
        use.pods += sign
        for port in demand.ports:
            if sign > 0:
                use.ports.append(port)
            elif port in use.ports:
                use.ports.remove(port)

    def demand(self, pod: dict[str, Any]) -> PodDemand:
        """What the pod takes of its node (PodRequests in the scheduler's units, host ports)."""
        uid = str(pod["metadata"].get("uid"))
        found = self._demands.get(uid)
        if found is None:
            found = self._demands[uid] = pod_asks(pod.get("spec") or {}).demand
        return found

    def node_has_room(self, pod: dict[str, Any], node: str) -> bool:
        """NodePorts and NodeResourcesFit: the node can take the pod beside what it runs."""
        node_obj = self.state.objects.get(("Node", "", node))
        allocatable = node_allocatable(node_obj) if node_obj is not None else None
        if allocatable is None:
            return node_obj is not None
        demand = self.demand(pod)
        use = self.node_use.get(node) or NodeUsage()
        if demand.ports and ports_conflict(use.ports, demand.ports):
            return False
        return not resource_reasons(demand, allocatable=allocatable, usage=use)

    def create_service(
        self, *, app: str, namespace: str, cpu: str, memory: str, host_port: int | None
    ) -> ObjKey:
        """A new ordinary pod (no claim), Pending until scheduled."""
        name = pod_name(self.rng, app)
        pod = service_pod_object(
            rng=self.rng,
            namespace=namespace,
            name=name,
            app=app,
            cpu=cpu,
            memory=memory,
            host_port=host_port,
            created=self.now(),
        )
        self.emit("ADDED", pod)
        return ("Pod", namespace, name)

    def add_claim(self, claim: dict[str, Any]) -> ObjKey:
        self.emit("ADDED", claim)
        namespace = claim["metadata"]["namespace"]
        self.count_claim(namespace, claim, +1)
        return ("ResourceClaim", namespace, claim["metadata"]["name"])

    def delete_claim(self, key: ObjKey) -> None:
        claim = self.state.objects[key]
        self.emit("DELETED", claim)
        self.count_claim(key[1], claim, -1)

    def create_workload(
        self,
        *,
        app: str,
        namespace: str,
        plan: list[ClaimPlan],
        specs: dict[str, dict[str, Any]],
        standalone: dict[str, str] | None = None,
        with_pod: bool = True,
    ) -> tuple[ObjKey | None, list[ObjKey]]:
        """New claims (pending) and, with `with_pod`, the Pending pod that waits for them.

        `standalone` maps podClaimName to an existing ResourceClaim to reference instead of
        creating one.
        """
        standalone = standalone or {}
        name = pod_name(self.rng, app)
        pod = pod_object(
            rng=self.rng,
            namespace=namespace,
            name=name,
            app=app,
            claims=[
                (pod_claim, source, standalone.get(pod_claim) or template)
                for pod_claim, source, template in plan
            ],
            created=self.now(),
        )
        claim_keys: list[ObjKey] = []
        statuses = []
        for pod_claim, source, template in plan:
            if pod_claim in standalone:
                claim_keys.append(("ResourceClaim", namespace, standalone[pod_claim]))
                continue
            if source == "template":
                claim_name = f"{name}-{pod_claim}-{random_suffix(self.rng)}"
                claim = claim_object(
                    rng=self.rng,
                    namespace=namespace,
                    name=claim_name,
                    spec=specs[template],
                    created=self.now(),
                    labels={"example.com/claim-template": template},
                    owner=pod if with_pod else None,
                    pod_claim=pod_claim,
                )
                statuses.append({"name": pod_claim, "resourceClaimName": claim_name})
            else:
                claim_name = f"{app}-{random_suffix(self.rng, 8)}"
                claim = claim_object(
                    rng=self.rng,
                    namespace=namespace,
                    name=claim_name,
                    spec=specs[template],
                    created=self.now(),
                    labels={"app.kubernetes.io/name": app},
                )
                pod["spec"]["resourceClaims"] = [
                    {"name": pc, "resourceClaimName": claim_name} if pc == pod_claim else entry
                    for entry, (pc, _, _) in zip(pod["spec"]["resourceClaims"], plan, strict=True)
                ]
            claim_keys.append(self.add_claim(claim))
        if statuses:
            pod["status"]["resourceClaimStatuses"] = statuses
        if not with_pod:
            self.sync_quota(namespace)
            return None, claim_keys
        pending_status(pod, nodes=max(1, len(self.state.by_kind["Node"])), now=self.now())
        self.emit("ADDED", pod)
        self.sync_quota(namespace)
        return ("Pod", namespace, name), claim_keys

    def pod_claims(self, pod: dict[str, Any]) -> list[ObjKey]:
        namespace = pod["metadata"]["namespace"]
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        keys = []
        for entry in pod["spec"].get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
            if name:
                keys.append(("ResourceClaim", namespace, name))
        return keys

    def claim_users(self, key: ObjKey) -> list[ObjKey]:
        """Pods that reference a claim by name (template-generated ones have one owner)."""
        return [
            pod_key
            for pod_key in self.state.keys("Pod")
            if pod_key[1] == key[1] and key in self.pod_claims(self.state.objects[pod_key])
        ]

    def node_usable(self, node: str) -> bool:
        obj = self.state.objects.get(("Node", "", node))
        return obj is not None and node_is_ready(obj)

    def claim_fits_node(self, claim: dict[str, Any], node: str) -> bool:
        """Whether an allocated claim's nodeSelector admits `node`."""
        selector = (_allocation(claim) or {}).get("nodeSelector")
        if not selector:
            return True
        node_obj = self.state.objects.get(("Node", "", node))
        return node_obj is not None and NodeSelector(selector).matches(
            NodeInfo.from_object(node_obj)
        )

    def allocate_claim(self, key: ObjKey, node: str) -> dict[str, Any] | None:
        """The allocated copy of one pending claim, allocated on `node`, or None.

        Its devices count as allocated once the copy is emitted.
        """
        claim = self.state.objects[key]
        allocations = self.state.allocate([claim], node=node, now=self.now())
        if allocations is None:
            return None
        return allocated_claim(claim, allocations[0])

    def schedule(self, pod_key: ObjKey, node: str, *, ip: str) -> bool:
        """Allocate the pod's pending claims together on `node`, reserve them all, run the pod.

        As the scheduler does: claims allocated already must admit the node, the pending ones
        are allocated in one allocator call, and nothing changes unless all of them fit.
        """
        pod = self.state.objects[pod_key]
        keys = self.pod_claims(pod)
        if any(key not in self.state.objects for key in keys):
            return False
        if not self.node_has_room(pod, node):
            return False
        if not keys:
            running = running_pod(pod, node=node, now=self.now(), ip=ip)
            self.emit("MODIFIED", running)
            self.count_pod(running, +1)
            return True
        claims = {key: self.state.objects[key] for key in keys}
        pending = [key for key, claim in claims.items() if not _allocation(claim)]
        if not all(self.claim_fits_node(claims[key], node) for key in claims if key not in pending):
            return False
        if pending:
            allocations = self.state.allocate(
                [claims[key] for key in pending], node=node, now=self.now()
            )
            if allocations is None:
                return False
            for key, allocation in zip(pending, allocations, strict=True):
                claims[key] = allocated_claim(claims[key], allocation)
        running = running_pod(pod, node=node, now=self.now(), ip=ip)
        for key in keys:
            self.emit("MODIFIED", reserved_claim(claims[key], running))
        self.emit("MODIFIED", running)
        self.count_pod(running, +1)
        return True

    def release_pod(self, pod_key: ObjKey, *, delete_standalone: bool) -> None:
        """Delete a pod, unreserve its claims, then delete or deallocate the unused ones.

        Claims generated for the pod go with it; a standalone claim nobody reserves any more is
        deallocated (back to pending) or, with `delete_standalone`, deleted.
        """
        pod = self.state.objects[pod_key]
        uid = pod["metadata"]["uid"]
        self.emit("DELETED", pod)
        self.count_pod(pod, -1)
        self._demands.pop(str(uid), None)
        for key in self.pod_claims(pod):
            claim = self.state.objects.get(key)
            if claim is None:
                continue
            owners = claim["metadata"].get("ownerReferences") or []
            if any(owner.get("uid") == uid for owner in owners):
                self.delete_claim(key)
                continue
            if any(r.get("uid") == uid for r in claim["status"].get("reservedFor") or []):
                claim = unreserved_claim(claim, uid)
                self.emit("MODIFIED", claim)
            if claim["status"].get("reservedFor"):
                continue
            if delete_standalone and not self.claim_users(key):
                self.delete_claim(key)
            elif claim["status"].get("allocation"):
                self.emit("MODIFIED", deallocated_claim(claim))
        self.sync_quota(pod_key[1])

    def pod_ip(self) -> str:
        octets = (self.rng.randrange(64, 128), self.rng.randrange(256), self.rng.randrange(1, 255))
        return "10.{}.{}.{}".format(*octets)


def _allocation(claim: dict[str, Any]) -> dict[str, Any] | None:
    allocation = (claim.get("status") or {}).get("allocation")
    return allocation if isinstance(allocation, dict) and allocation else None
