"""Extended resources backed by DRA: the implicit claim the scheduler makes for such a pod.

A container asking for a DeviceClass's `spec.extendedResourceName`, or for
`deviceclass.resource.kubernetes.io/<class>` (every class has that name), gets its devices through
one ResourceClaim per pod that the scheduler writes itself (upstream
`dynamicresources/extendeddynamicresources.go`): one request per container and resource, named
`container-<index>-request-<index of the resource among the container's sorted requests>`, asking
for exactly the class, ExactCount, count = the quantity. Init containers that run to completion
first reuse the devices of later long-lived containers and only the largest such request is kept.
Requests are sorted by name. Nodes offering the resource through a device plugin are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from claims.whatif.inputs import JSON, WhatIfError

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def class_mapping(classes: Iterable[JSON]) -> dict[str, str]:
    """Extended resource name -> DeviceClass name, explicit names and the implicit prefix form."""
    mapping: dict[str, str] = {}
    for device_class in classes:
        name = str((device_class.get("metadata") or {}).get("name") or "")
        explicit = (device_class.get("spec") or {}).get("extendedResourceName")
        if explicit:
            mapping[str(explicit)] = name
        mapping[DEVICE_CLASS_PREFIX + name] = name
    return mapping


def _container_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    # The API server defaults requests of extended resources to their limits.
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    out = dict(limits) if isinstance(limits, Mapping) else {}
    if isinstance(requests, Mapping):
        out.update(requests)
    return out


def requested_names(spec: Mapping[str, Any]) -> set[str]:
    """Every resource name any container of the pod spec asks for."""
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if isinstance(container, Mapping):
                names.update(str(n) for n in _container_requests(container))
    return names


def _count(value: Any, *, where: str) -> int:
    text = str(value).strip()
    try:
        count = int(text, 10)
    except ValueError as exc:
        raise WhatIfError(where, f"extended resources are whole numbers, got {value!r}") from exc
    if count < 0:
        raise WhatIfError(where, "must be 0 or more")
    return count


def implicit_requests(
    spec: Mapping[str, Any], *, mapping: Mapping[str, str], where: str
) -> list[JSON]:
    """The device requests of the pod's implicit claim (empty when it asks for none)."""
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    containers = init + [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    long_lived = [
        i for i, c in enumerate(containers) if i >= len(init) or c.get("restartPolicy") == "Always"
    ]
    short_lived = [i for i in range(len(init)) if i not in long_lived]
    paths = [f"{where}: spec.initContainers[{i}]" for i in range(len(init))] + [
        f"{where}: spec.containers[{i}]" for i in range(len(containers) - len(init))
    ]
    requests: list[JSON] = []
    wanted = sorted(n for n in {*requested_names(spec)} if n in mapping)
    for resource in wanted:
        class_name = mapping[resource]
        per_container: dict[int, JSON] = {}
        for i in long_lived:
            request = _request(containers, i, resource, class_name, reusable=[], where=paths[i])
            if request is not None:
                per_container[i] = request
        largest: JSON | None = None
        for i in short_lived:
            reusable = [per_container[j] for j in sorted(per_container) if j >= i]
            request = _request(
                containers, i, resource, class_name, reusable=reusable, where=paths[i]
            )
            if request is not None and (
                largest is None or largest["exactly"]["count"] < request["exactly"]["count"]
            ):
                largest = request
        if largest is not None:
            requests.append(largest)
        requests.extend(per_container[i] for i in sorted(per_container))
    return sorted(requests, key=lambda r: str(r["name"]))


def _request(
    containers: list[Mapping[str, Any]],
    index: int,
    resource: str,
    class_name: str,
    *,
    reusable: list[JSON],
    where: str,
) -> JSON | None:
    requests = _container_requests(containers[index])
    if resource not in requests:
        return None
    count = _count(requests[resource], where=f"{where}.resources.requests[{resource}]")
    if count == 0:
        return None
    covered = 0
    for other in reusable:
        covered += int(other["exactly"]["count"])
        if covered >= count:
            return None
    position = sorted(str(n) for n in requests).index(resource)
    return {
        "name": f"container-{index}-request-{position}",
        "exactly": {
            "deviceClassName": class_name,
            "allocationMode": "ExactCount",
            "count": count - covered,
        },
    }


def implicit_claim(pod: JSON, *, requests: list[JSON]) -> JSON:
    """The claim object the scheduler would create for the pod (named after generateName)."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{meta.get('name')}-extended-resources",
            "namespace": meta.get("namespace"),
            "annotations": {CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": requests}},
    }
