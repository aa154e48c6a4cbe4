"""How the cluster-scoped inventory kinds map onto rows: nodes, namespaces, classes, taint rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inventory.choices import Kind
from inventory.models import (
    DeviceClass,
    DeviceTaintRule,
    Namespace,
    Node,
    ResourceClass,
)
from inventory.sync.core import (
    JSON,
    BatchResult,
    KindHandler,
    delete_row,
    delete_rows,
    register,
)


def _is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_columns(obj: JSON) -> JSON:
    return {
        "ready": _is_ready(obj),
        "unschedulable": bool((obj.get("spec") or {}).get("unschedulable")),
    }


def delete_node(rows: list[Any], result: BatchResult) -> None:
    result.touch("nodes", *(row.name for row in rows))
    delete_rows(rows)


def namespace_columns(obj: JSON) -> JSON:
    # Name and labels are common columns; the admin-access check reads only the labels.
    return {}


def device_class_columns(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    return {
        "selectors": spec.get("selectors") or [],
        "config": spec.get("config") or [],
        "extended_resource_name": spec.get("extendedResourceName") or "",
    }


def resource_class_columns(obj: JSON) -> JSON:
    driver = obj.get("driverName") or (obj.get("classic") or {}).get("driverName") or ""
    return {"driver_name": str(driver)}


def taint_rule_columns(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    selector = spec.get("deviceSelector") or {}
    return {
        "driver": selector.get("driver") or "",
        "pool_name": selector.get("pool") or "",
        "device_name": selector.get("device") or "",
        "taint": spec.get("taint") or {},
    }


def register_inventory_kinds() -> None:
    register(
        KindHandler(
            Kind.NODE, Node, node_columns, delete_node, "nodes", live_id=lambda row: row.name
        )
    )
    register(
        KindHandler(
            Kind.NAMESPACE,
            Namespace,
            namespace_columns,
            delete_row("namespaces"),
            "namespaces",
            live_id=lambda row: row.name,
        )
    )
    register(
        KindHandler(
            Kind.DEVICE_CLASS, DeviceClass, device_class_columns, delete_row("classes"), "classes"
        )
    )
    register(
        KindHandler(
            Kind.RESOURCE_CLASS,
            ResourceClass,
            resource_class_columns,
            delete_row("classes"),
            "classes",
        )
    )
    # A taint rule may change any device's taints: the live layer refreshes all of them.
    register(
        KindHandler(
            Kind.DEVICE_TAINT_RULE,
            DeviceTaintRule,
            taint_rule_columns,
            delete_row("devices"),
            "devices",
            live_id=lambda row: "*",
        )
    )
