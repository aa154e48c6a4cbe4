"""Objects and raw requests the fake API server tests send with the official client."""

from __future__ import annotations

import json
import threading
from typing import Any

from kubernetes import client

GROUP = "resource.k8s.io"


def slice_obj(name: str, *, version: str = "v1", driver: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {"driver": driver.split(".")[0]}},
        "spec": {
            "driver": driver,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        },
    }


def claim_obj(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": []}},
    }


def raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def list_slices(api: client.ApiClient, **kwargs: Any) -> dict[str, Any]:
    custom = client.CustomObjectsApi(api)
    return raw(
        custom.list_cluster_custom_object(
            GROUP, "v1", "resourceslices", _preload_content=False, **kwargs
        )
    )


def stream_lines(api: client.ApiClient, **kwargs: Any) -> Any:
    """Open a raw watch on ResourceSlices; returns the urllib3 response."""
    custom = client.CustomObjectsApi(api)
    return custom.list_cluster_custom_object(
        GROUP, "v1", "resourceslices", watch=True, _preload_content=False, **kwargs
    )


def later(delay: float, action: Any) -> threading.Timer:
    timer = threading.Timer(delay, action)
    timer.start()
    return timer
