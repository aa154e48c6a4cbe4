"""Device health: what pods report (KEP-4680), NoExecute taints and device status conditions.

The kubelet writes each container's `status.containerStatuses[].allocatedResourcesStatus`:
entries named `claim:<claim>/<request>` (or `claim:<claim>`), where `<claim>` is the pod's own
name for the claim (`spec.resourceClaims[].name`), each listing `resources` with a
`resourceID` of `<driver>/<pool>/<device>` and a `health` of Healthy, Unhealthy or Unknown.
The sync keeps them flattened in `Pod.resource_health` (`resource_health_of`), so finding
the devices a running pod reports Unhealthy is one query over the few pods that report.

`device_health` and `claim_health` gather, for one device or one claim, the three sources a
viewer needs side by side: pod reports, NoExecute taints (the device's own, or a
DeviceTaintRule) and `status.devices[].conditions` of the claims that hold it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Q

from claims.models import AllocatedDevice, Pod, ResourceClaim
from inventory.choices import TaintEffect
from inventory.models import Device, DeviceTaintRule

HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
FINISHED_PHASES = ("Succeeded", "Failed")
DeviceKey = tuple[str, str, str]


def split_resource_id(resource_id: str) -> DeviceKey | None:
    """driver/pool/device of a DRA resourceID; the pool name may itself contain slashes."""
    driver, _, rest = resource_id.partition("/")
    pool, _, device = rest.rpartition("/")
    if not (driver and pool and device):
        return None
    return driver, pool, device


def _claim_ref(name: str) -> tuple[str, str] | None:
    if not name.startswith("claim:"):
        return None
    ref, _, request = name.removeprefix("claim:").partition("/")
    return ref, request


def resource_health_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A pod's DRA resource health reports, one entry per container, claim and resource:
    {container, claim (the pod's reference name), request, resourceID, health, message}."""
    status = obj.get("status") or {}
    entries: list[dict[str, Any]] = []
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for container in status.get(key) or []:
            if not isinstance(container, Mapping):
                continue
            for report in container.get("allocatedResourcesStatus") or []:
                ref = _claim_ref(str((report or {}).get("name") or ""))
                if ref is None:
                    continue  # a device plugin resource, not DRA
                for resource in report.get("resources") or []:
                    if not isinstance(resource, Mapping):
                        continue
                    entries.append(
                        {
                            "container": str(container.get("name") or ""),
                            "claim": ref[0],
                            "request": ref[1],
                            "resourceID": str(resource.get("resourceID") or ""),
                            "health": str(resource.get("health") or UNKNOWN),
                            "message": resource.get("message"),
                        }
                    )
    return entries


def claim_name_for(pod: Pod, reference: str) -> str | None:
    """The ResourceClaim a pod's claim reference name stands for (direct, or from a template
    through status.resourceClaimStatuses)."""
    for entry in pod.resource_claims or []:
        if (
            isinstance(entry, Mapping)
            and entry.get("name") == reference
            and entry.get("resourceClaimName")
        ):
            return str(entry["resourceClaimName"])
    for entry in pod.claim_statuses or []:
        if isinstance(entry, Mapping) and entry.get("name") == reference:
            return str(entry.get("resourceClaimName") or "") or None
    return None


def _reporting_pods() -> Iterable[Pod]:
    # Finished pods' reports are frozen at their end: they say nothing about the device now.
    return (
        Pod.objects.exclude(resource_health=[])
        .exclude(phase__in=FINISHED_PHASES)
        .only("pk", "namespace", "name", "resource_health", "resource_claims", "claim_statuses")
    )


def pod_reports() -> list[dict[str, Any]]:
    """Every report of a running pod, with its pod, the claim resolved and the device key."""
    reports = []
    for pod in _reporting_pods():
        for entry in pod.resource_health:
            key = split_resource_id(entry.get("resourceID", ""))
            claim = claim_name_for(pod, entry.get("claim", ""))
            reports.append(
                {
                    "source": "pod",
                    "pod": f"{pod.namespace}/{pod.name}",
                    "container": entry.get("container", ""),
                    "claim": f"{pod.namespace}/{claim}" if claim else None,
                    "request": entry.get("request", ""),
                    "resourceID": entry.get("resourceID", ""),
                    "health": entry.get("health", UNKNOWN),
                    "message": entry.get("message"),
                    "key": key,
                }
            )
    return reports


def reported_unhealthy_keys() -> set[DeviceKey]:
    """driver/pool/device that a running pod reports Unhealthy."""
    return {r["key"] for r in pod_reports() if r["health"] == UNHEALTHY and r["key"]}


def unhealthy_keys_of(pod: Pod) -> frozenset[DeviceKey]:
    """driver/pool/device that this one pod reports Unhealthy (none once it has finished): the
    per-pod part of `reported_unhealthy_keys`, for keeping reports pod by pod."""
    if pod.phase in FINISHED_PHASES:
        return frozenset()
    keys = (
        split_resource_id(str(entry.get("resourceID", "")))
        for entry in pod.resource_health or []
        if isinstance(entry, Mapping) and entry.get("health", UNKNOWN) == UNHEALTHY
    )
    return frozenset(key for key in keys if key)


def _no_execute_taints(device: Device) -> list[dict[str, Any]]:
    taints = [
        {"source": "taint", "taint": dict(t)}
        for t in device.taints or []
        if isinstance(t, Mapping) and t.get("effect") == TaintEffect.NO_EXECUTE
    ]
    rules = DeviceTaintRule.objects.filter(
        Q(driver="") | Q(driver=device.driver),
        Q(pool_name="") | Q(pool_name=device.pool_name),
        Q(device_name="") | Q(device_name=device.name),
        taint__effect=TaintEffect.NO_EXECUTE,
    ).only("name", "taint")
    taints += [{"source": "taint-rule", "rule": r.name, "taint": r.taint} for r in rules]
    return taints


def _conditions(entries: Iterable[AllocatedDevice]) -> list[dict[str, Any]]:
    return [
        {
            "source": "device-status",
            "claim": f"{entry.claim.namespace}/{entry.claim.name}",
            "resourceID": entry.key,
            "conditions": entry.conditions,
        }
        for entry in entries
        if entry.conditions
    ]


def _public(report: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in report.items() if key != "key"}


def device_health(device: Device) -> list[dict[str, Any]]:
    """Pod reports about the device, its NoExecute taints and its device status conditions."""
    key = (device.driver, device.pool_name, device.name)
    reports = [_public(r) for r in pod_reports() if r["key"] == key]
    held = AllocatedDevice.objects.filter(
        driver=device.driver, pool=device.pool_name, device=device.name
    ).select_related("claim")
    return [*reports, *_no_execute_taints(device), *_conditions(held)]


def claim_health(claim: ResourceClaim) -> list[dict[str, Any]]:
    """Pod reports about the claim, and the taints and conditions of the devices it holds."""
    name = f"{claim.namespace}/{claim.name}"
    entries = list(claim.allocated_devices.all())
    keys = {(e.driver, e.pool, e.device) for e in entries}
    reports = [_public(r) for r in pod_reports() if r["claim"] == name or r["key"] in keys]
    taints: list[dict[str, Any]] = []
    devices = Device.objects.filter(current=True, name__in={k[2] for k in keys})
    for device in devices:
        if (device.driver, device.pool_name, device.name) in keys:
            taints += [{**taint, "resourceID": device.key} for taint in _no_execute_taints(device)]
    for entry in entries:
        entry.claim = claim  # already loaded: no query per entry
    return [*reports, *taints, *_conditions(entries)]
