"""The demo cluster's current state: every object, the device inventory and who holds what.

`ClusterState` is shared by the generator (which builds a cluster through it) and the churn loop
(which rebuilds it from a list of objects). Allocation is first-fit on one node: devices on the
node plus network-attached devices whose pool selects the node's zone, skipping tainted devices,
devices of incomplete pools, devices already held, counters that would be exceeded and shared
capacity that would be overcommitted. adminAccess results hold nothing, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from demo.catalog import (
    CLAIM_FINALIZER,
    DEVICE_CLASSES,
    ZONE_LABEL,
    DemoError,
    DeviceInfo,
    parse_quantity,
    selectors_match,
)
from demo.topology import slice_counters, slice_devices

ObjKey = tuple[str, str, str]
DeviceKey = tuple[str, str, str]
CounterKey = tuple[str, str, str]

KIND_ORDER = (
    "Namespace",
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
    "ResourceQuota",
)


def object_key(obj: dict[str, Any]) -> ObjKey:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise DemoError(f"{obj.get('kind', '?')} object: metadata.name is missing")
    return (str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta["name"]))


def node_is_ready(node: dict[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


class ClusterState:
    """Objects by (kind, namespace, name) plus the indexes allocation needs."""

    def __init__(self) -> None:
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self.by_kind: dict[str, dict[ObjKey, None]] = {kind: {} for kind in KIND_ORDER}
        self.devices: dict[DeviceKey, DeviceInfo] = {}
        self.node_devices: dict[str, list[DeviceKey]] = {}
        self.zone_devices: dict[str, list[DeviceKey]] = {}
        self.pool_slices: dict[tuple[str, str], dict[ObjKey, None]] = {}
        self.counter_capacity: dict[CounterKey, dict[str, int]] = {}
        self.counter_used: dict[CounterKey, dict[str, int]] = {}
        self.exclusive: dict[DeviceKey, ObjKey] = {}
        self.shares: dict[DeviceKey, dict[str, dict[str, int]]] = {}
        self.pool_devices: dict[tuple[str, str], list[DeviceKey]] = {}
        self.pool_counters: dict[tuple[str, str], list[CounterKey]] = {}
        self.taint_selectors: list[dict[str, str]] = []
        self.applied: dict[ObjKey, list[tuple[DeviceKey, str | None, dict[str, int]]]] = {}

    def add(self, obj: dict[str, Any]) -> ObjKey:
        """Store a new or replaced object and refresh the indexes it feeds."""
        key = object_key(obj)
        kind = key[0]
        previous = self.objects.get(key)
        if previous is not None and kind == "ResourceClaim":
            self.release(key)
        self.objects[key] = obj
        self.by_kind.setdefault(kind, {})[key] = None
        if kind == "ResourceSlice":
            spec = obj.get("spec") or {}
            pool = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
            self.pool_slices.setdefault(pool, {})[key] = None
            self.reindex_pool(pool)
        elif kind == "DeviceTaintRule":
            self._index_taint_rule(obj)
        elif kind == "ResourceClaim":
            self._apply_status(key, obj)
        return key

    def remove(self, key: ObjKey) -> dict[str, Any]:
        """Drop an object; a claim's devices are released, a slice's pool re-read."""
        obj = self.objects.pop(key)
        self.by_kind[key[0]].pop(key, None)
        if key[0] == "ResourceClaim":
            self.release(key)
        elif key[0] == "ResourceSlice":
            spec = obj.get("spec") or {}
            pool = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
            self.pool_slices.get(pool, {}).pop(key, None)
            self.reindex_pool(pool)
        return obj

    def keys(self, kind: str) -> list[ObjKey]:
        return list(self.by_kind.get(kind, {}))

    def ordered_objects(self) -> list[dict[str, Any]]:
        """Every object, grouped by kind in dependency order (namespaces and nodes first)."""
        kinds = [*KIND_ORDER, *sorted(set(self.by_kind) - set(KIND_ORDER))]
        return [self.objects[key] for kind in kinds for key in self.by_kind.get(kind, {})]

    def reindex_pool(self, pool: tuple[str, str]) -> None:
        """Re-read a pool: only the newest generation counts, and only if it is complete."""
        for key in self.pool_devices.pop(pool, []):
            device = self.devices.pop(key)
            index = (
                self.node_devices.get(device.node, [])
                if device.node
                else self.zone_devices.get(device.zone or "", [])
            )
            if key in index:
                index.remove(key)
        for counter_key in self.pool_counters.pop(pool, []):
            del self.counter_capacity[counter_key]
        slices = [self.objects[k] for k in self.pool_slices.get(pool, {})]
        if not slices:
            return
        newest = max(int(s["spec"]["pool"].get("generation", 0)) for s in slices)
        current = [s for s in slices if int(s["spec"]["pool"].get("generation", 0)) == newest]
        declared = int(current[0]["spec"]["pool"].get("resourceSliceCount", 1))
        if len(current) != declared:
            return
        for resource_slice in current:
            for name, counters in slice_counters(resource_slice).items():
                self.counter_capacity[(pool[0], pool[1], name)] = counters
                self.pool_counters.setdefault(pool, []).append((pool[0], pool[1], name))
            for device in slice_devices(resource_slice):
                device.tainted = device.tainted or self._rule_taints(device.key)
                self.devices[device.key] = device
                self.pool_devices.setdefault(pool, []).append(device.key)
                if device.node:
                    self.node_devices.setdefault(device.node, []).append(device.key)
                elif device.zone:
                    self.zone_devices.setdefault(device.zone, []).append(device.key)

    def _index_taint_rule(self, rule: dict[str, Any]) -> None:
        spec = rule.get("spec") or {}
        if (spec.get("taint") or {}).get("effect") not in ("NoSchedule", "NoExecute"):
            return
        self.taint_selectors.append(dict(spec.get("deviceSelector") or {}))
        for key, device in self.devices.items():
            device.tainted = device.tainted or self._rule_taints(key)

    def _rule_taints(self, key: DeviceKey) -> bool:
        return any(
            selector.get("driver", key[0]) == key[0]
            and selector.get("pool", key[1]) == key[1]
            and selector.get("device", key[2]) == key[2]
            for selector in self.taint_selectors
        )

    def node_zone(self, node: str) -> str | None:
        obj = self.objects.get(("Node", "", node))
        if obj is None:
            return None
        return (obj["metadata"].get("labels") or {}).get(ZONE_LABEL)

    def _apply_status(self, key: ObjKey, claim: dict[str, Any]) -> None:
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            self.hold(key, (allocation.get("devices") or {}).get("results") or [])

    def hold(self, claim: ObjKey, results: Iterable[dict[str, Any]]) -> None:
        """Mark the devices of allocation results as taken by `claim`."""
        held = self.applied.setdefault(claim, [])
        for result in results:
            if result.get("adminAccess"):
                continue
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            device = self.devices.get(key)
            share = result.get("shareID")
            if share:
                where = f"ResourceClaim {claim[1]}/{claim[2]}: consumedCapacity"
                amounts = {
                    name: parse_quantity(value, where=where)
                    for name, value in (result.get("consumedCapacity") or {}).items()
                }
                self.shares.setdefault(key, {})[share] = amounts
                held.append((key, share, amounts))
                continue
            self.exclusive[key] = claim
            held.append((key, None, {}))
            for counter_set, counters in device.consumes if device else []:
                used = self.counter_used.setdefault((key[0], key[1], counter_set), {})
                for counter, value in counters.items():
                    used[counter] = used.get(counter, 0) + value

    def release(self, claim: ObjKey) -> None:
        """Give back whatever `claim` holds (no-op when it holds nothing)."""
        for key, share, _amounts in self.applied.pop(claim, []):
            if share:
                shares = self.shares.get(key, {})
                shares.pop(share, None)
                if not shares:
                    self.shares.pop(key, None)
                continue
            if self.exclusive.get(key) == claim:
                del self.exclusive[key]
            device = self.devices.get(key)
            for counter_set, counters in device.consumes if device else []:
                used = self.counter_used.get((key[0], key[1], counter_set), {})
                for counter, value in counters.items():
                    used[counter] = used.get(counter, 0) - value

    def candidates(self, node: str) -> list[DeviceInfo]:
        """Devices a pod on `node` can reach: the node's own and its zone's network devices."""
        keys = list(self.node_devices.get(node, []))
        zone = self.node_zone(node)
        if zone:
            keys.extend(self.zone_devices.get(zone, []))
        return [self.devices[k] for k in keys]

    def allocate(
        self, spec: dict[str, Any], *, node: str, claim: ObjKey, now: str, share_ids: list[str]
    ) -> dict[str, Any] | None:
        """First-fit allocation of a claim spec on one node, as `status.allocation`, or None.

        Nothing is held yet: call `hold` with the results to commit them. `share_ids` supplies
        the uids for shared (allowMultipleAllocations) results, consumed from the front.
        """
        devices = (spec or {}).get("devices") or {}
        requests = devices.get("requests") or []
        constraint = next(
            (c for c in devices.get("constraints") or [] if c.get("matchAttribute")), None
        )
        candidates = self.candidates(node)
        if constraint is None:
            results = _Attempt(self, candidates, claim).run(requests, None, None)
        else:
            domain, _, attribute = str(constraint["matchAttribute"]).partition("/")
            values = sorted(
                {
                    d.attributes[attribute]
                    for d in candidates
                    if d.driver == domain and attribute in d.attributes
                },
                key=str,
            )
            results = None
            for value in values:
                limited = set(constraint.get("requests") or [r.get("name") for r in requests])
                results = _Attempt(self, candidates, claim).run(
                    requests, (domain, attribute, value), limited
                )
                if results is not None:
                    break
        if results is None:
            return None
        return self._allocation(spec, results=results, node=node, now=now, share_ids=share_ids)

    def _allocation(
        self,
        spec: dict[str, Any],
        *,
        results: list[tuple[str, DeviceInfo, bool, dict[str, str] | None]],
        node: str,
        now: str,
        share_ids: list[str],
    ) -> dict[str, Any]:
        out = []
        by_class: dict[str, list[str]] = {}
        term: dict[str, Any] = {}
        for request, device, admin, consumed in results:
            result: dict[str, Any] = {
                "request": request,
                "driver": device.driver,
                "pool": device.pool,
                "device": device.name,
            }
            if admin:
                result["adminAccess"] = True
            if consumed is not None:
                result["shareID"] = share_ids.pop(0)
                result["consumedCapacity"] = consumed
            out.append(result)
            device_class = _request_class(spec, request)
            names = by_class.setdefault(device_class, [])
            if request not in names:
                names.append(request)
            if device.node:
                term["matchFields"] = [
                    {"key": "metadata.name", "operator": "In", "values": [device.node]}
                ]
            elif device.zone:
                term["matchExpressions"] = [
                    {"key": ZONE_LABEL, "operator": "In", "values": [device.zone]}
                ]
        config = [
            {"source": "FromClass", "requests": names, **entry}
            for device_class, names in by_class.items()
            for entry in DEVICE_CLASSES.get(device_class, {}).get("config", [])
        ]
        config.extend(
            {"source": "FromClaim", **entry}
            for entry in ((spec.get("devices") or {}).get("config") or [])
        )
        allocation: dict[str, Any] = {"devices": {"results": out}}
        if config:
            allocation["devices"]["config"] = config
        if term:
            allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
        allocation["allocationTimestamp"] = now
        return allocation

    def gpus_in_use(self, node: str) -> int:
        """GPUs of a node held whole or through any partition."""
        parents = set()
        for key in self.node_devices.get(node, []):
            if key in self.exclusive:
                device = self.devices[key]
                parents.add(device.attributes.get("parentIndex", device.attributes.get("index")))
        return len(parents)


def _request_class(spec: dict[str, Any], request: str) -> str:
    parent, _, sub = request.partition("/")
    for item in (spec.get("devices") or {}).get("requests") or []:
        if item.get("name") != parent:
            continue
        if sub:
            for alternative in item.get("firstAvailable") or []:
                if alternative.get("name") == sub:
                    return str(alternative.get("deviceClassName", ""))
        return str((item.get("exactly") or {}).get("deviceClassName", ""))
    return ""


def allocated_claim(claim: dict[str, Any], allocation: dict[str, Any]) -> dict[str, Any]:
    """Copy of a claim with an allocation and the finalizer the scheduler adds with it."""
    updated = {
        **claim,
        "metadata": dict(claim["metadata"]),
        "status": dict(claim.get("status") or {}),
    }
    updated["metadata"]["finalizers"] = [CLAIM_FINALIZER]
    updated["status"]["allocation"] = allocation
    return updated


class _Attempt:
    """One try at satisfying every request of a claim, with tentative bookkeeping."""

    def __init__(self, state: ClusterState, candidates: list[DeviceInfo], claim: ObjKey) -> None:
        self.state = state
        self.candidates = candidates
        self.claim = claim
        self.taken: set[DeviceKey] = set()
        self.counters: dict[CounterKey, dict[str, int]] = {}
        self.shared: dict[DeviceKey, dict[str, int]] = {}

    def run(
        self,
        requests: list[dict[str, Any]],
        match: tuple[str, str, Any] | None,
        limited: set[str] | None,
    ) -> list[tuple[str, DeviceInfo, bool, dict[str, str] | None]] | None:
        results: list[tuple[str, DeviceInfo, bool, dict[str, str] | None]] = []
        for request in requests:
            name = str(request.get("name", ""))
            constrained = match if limited is None or name in limited else None
            if request.get("firstAvailable"):
                alternatives = [
                    (f"{name}/{sub.get('name', '')}", sub) for sub in request["firstAvailable"]
                ]
            elif request.get("exactly"):
                alternatives = [(name, request["exactly"])]
            else:
                return None
            for request_name, alternative in alternatives:
                picked = self._pick(request_name, alternative, constrained)
                if picked is not None:
                    results.extend(picked)
                    break
            else:
                return None
        return results

    def _pick(
        self, request_name: str, request: dict[str, Any], match: tuple[str, str, Any] | None
    ) -> list[tuple[str, DeviceInfo, bool, dict[str, str] | None]] | None:
        device_class = DEVICE_CLASSES.get(str(request.get("deviceClassName", "")))
        if device_class is None:
            return None
        admin = bool(request.get("adminAccess"))
        mode = request.get("allocationMode") or "ExactCount"
        wanted = int(request.get("count") or 1)
        capacity_requests = (request.get("capacity") or {}).get("requests") or {}
        matching = [
            d
            for d in self.candidates
            if not d.tainted
            and (match is None or (d.driver == match[0] and d.attributes.get(match[1]) == match[2]))
            and selectors_match(device_class["selectors"], d)
            and selectors_match(request.get("selectors") or [], d)
        ]
        picked: list[tuple[str, DeviceInfo, bool, dict[str, str] | None]] = []
        for device in matching:
            if mode == "ExactCount" and len(picked) == wanted:
                break
            if admin:
                picked.append((request_name, device, True, None))
                continue
            if device.multiple:
                consumed = self._take_share(device, capacity_requests)
                if consumed is None:
                    if mode == "All":
                        return None
                    continue
                picked.append((request_name, device, False, consumed))
            elif self._take(device):
                picked.append((request_name, device, False, None))
            elif mode == "All":
                return None
        if not picked or (mode == "ExactCount" and len(picked) < wanted):
            return None
        return picked

    def _take(self, device: DeviceInfo) -> bool:
        key = device.key
        if key in self.taken or key in self.state.exclusive or key in self.state.shares:
            return False
        for counter_set, counters in device.consumes:
            counter_key = (device.driver, device.pool, counter_set)
            capacity = self.state.counter_capacity.get(counter_key)
            if capacity is None:
                return False
            used = self.state.counter_used.get(counter_key, {})
            extra = self.counters.get(counter_key, {})
            for counter, value in counters.items():
                if used.get(counter, 0) + extra.get(counter, 0) + value > capacity.get(counter, 0):
                    return False
        self.taken.add(key)
        for counter_set, counters in device.consumes:
            extra = self.counters.setdefault((device.driver, device.pool, counter_set), {})
            for counter, value in counters.items():
                extra[counter] = extra.get(counter, 0) + value
        return True

    def _take_share(
        self, device: DeviceInfo, capacity_requests: dict[str, str]
    ) -> dict[str, str] | None:
        key = device.key
        if key in self.state.exclusive or key in self.taken:
            return None
        consumed = {
            name: str(capacity_requests.get(name, default))
            for name, default in device.shared_default.items()
        }
        where = f"request capacity on {device.driver}/{device.pool}/{device.name}"
        amounts = {name: parse_quantity(value, where=where) for name, value in consumed.items()}
        in_use = self.state.shares.get(key, {}).values()
        tentative = self.shared.setdefault(key, {})
        for name, amount in amounts.items():
            total = sum(share.get(name, 0) for share in in_use) + tentative.get(name, 0)
            if total + amount > device.capacity.get(name, 0):
                return None
        for name, amount in amounts.items():
            tentative[name] = tentative.get(name, 0) + amount
        return consumed
