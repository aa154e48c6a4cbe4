"""Objects of the preemption tests: upstream's "small" nodes and pods of 1-5 units at its
priorities (`TestPickOneNodeForPreemption` in defaultpreemption/default_preemption_test.go)."""

from __future__ import annotations

from typing import Any

import yaml

from claims.whatif.service import what_if
from tests.claims.whatif.conftest import load_objects

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
# Units of upstream's test containers: small 1, medium 2, large 3, very large 5.
SMALL, MEDIUM, LARGE, VERY_LARGE = 1, 2, 3, 5
CLASSES = {"neg": NEG, "low": LOW, "mid": MID, "high": HIGH, "very-high": VERY_HIGH}


def node(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": extra,
        "status": {
            "allocatable": {"cpu": "500m", "memory": "1000Mi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def priority_class(name: str, value: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"uid-pc-{name}"},
        "value": value,
        **extra,
    }


def running(
    name: str,
    node_name: str,
    units: int,
    priority: int,
    *,
    started: str = "2026-01-01T00:00:00Z",
    labels: dict[str, str] | None = None,
    namespace: str = "team",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-pod-{name}",
            "creationTimestamp": started,
            "labels": labels or {"app": name},
        },
        "spec": {
            "nodeName": node_name,
            "priority": priority,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": f"{100 * units}m", "memory": f"{200 * units}Mi"}
                    },
                }
            ],
            **spec,
        },
        "status": {"phase": "Running"},
    }


def asking(units: int, class_name: str = "high", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "preemptor", "namespace": "team"},
        "spec": {
            "priorityClassName": class_name,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": f"{100 * units}m", "memory": f"{200 * units}Mi"}
                    },
                }
            ],
            **spec,
        },
    }


def cluster(nodes: int, pods: list[dict[str, Any]], *extra: dict[str, Any]) -> None:
    classes = [priority_class(n, v) for n, v in CLASSES.items()]
    load_objects([*classes, *(node(f"machine{i}") for i in range(1, nodes + 1)), *pods, *extra])


def ask(pod: dict[str, Any], **options: Any) -> dict[str, Any]:
    return what_if(yaml.safe_dump(pod), use_cache=False, preemption=True, **options)
