"""Node shapes for the what-if `add-nodes` op: nodes that do not exist yet.

A shape is what one node of a type would bring: the Node's labels (and spec, if given) and the
ResourceSlices its drivers would publish, pasted as they would appear in the cluster with the
placeholder `{node}` wherever the node's name goes (`metadata.name`, `spec.nodeName`,
`spec.pool.name`, label values). Slices may be in any served version; they are checked (with
the API server's validation, `normalize(..., validate=True)`, as imported snapshots are: names,
limits such as 64-character attribute values and 4 taints per device) and normalized to v1 once,
when the request is parsed, and stamped with a name per added node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claims.whatif.inputs import JSON, WhatIfError
from dralib.kube.normalize import NormalizeError, normalize

PLACEHOLDER = "{node}"
MAX_SHAPE_SLICES = 64
# A valid node name stands in for the placeholder while the normalizers check the objects.
_PROBE = "whatif-placeholder-node-0"


def substitute(value: Any, old: str, new: str) -> Any:
    """A copy of a JSON value with `old` replaced by `new` in every string, keys included."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, Mapping):
        return {substitute(k, old, new): substitute(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(item, old, new) for item in value]
    return value


def _normalized(obj: JSON, *, kind: str, where: str) -> JSON:
    try:
        # Validated as the API server validates what is created, as imported snapshots are.
        checked = normalize(substitute(obj, PLACEHOLDER, _PROBE), kind=kind, validate=True)
    except NormalizeError as exc:
        field = f".{exc.field}" if exc.field else ""
        raise WhatIfError(f"{where}{field}", exc.reason) from exc
    return substitute(checked, _PROBE, PLACEHOLDER)


def _node(value: Any, *, where: str) -> JSON:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise WhatIfError(where, "expected a Node (or {labels: {...}})")
    meta = value.get("metadata") if isinstance(value.get("metadata"), Mapping) else {}
    labels = value.get("labels", meta.get("labels")) or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise WhatIfError(f"{where}.labels", "expected a map of strings")
    labels = {"kubernetes.io/hostname": PLACEHOLDER, **labels}
    node: JSON = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": PLACEHOLDER, "uid": f"whatif-{PLACEHOLDER}", "labels": dict(labels)},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    if isinstance(value.get("spec"), Mapping):
        node["spec"] = dict(value["spec"])
    return _normalized(node, kind="Node", where=where)


def _slice(value: Any, *, where: str) -> JSON:
    if not isinstance(value, Mapping):
        raise WhatIfError(where, "expected a ResourceSlice")
    obj = dict(value)
    obj.setdefault("apiVersion", "resource.k8s.io/v1")
    obj.setdefault("kind", "ResourceSlice")
    if obj["kind"] != "ResourceSlice":
        raise WhatIfError(f"{where}.kind", f"expected ResourceSlice, got {obj['kind']!r}")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise WhatIfError(f"{where}.metadata", "expected a mapping (name, labels, ...)")
    meta = dict(meta)
    name = str(meta.get("name") or "shape-slice")
    # Every added node needs slices of its own name.
    meta["name"] = name if PLACEHOLDER in name else f"{name}-{PLACEHOLDER}"
    meta.setdefault("uid", f"whatif-{meta['name']}")
    obj["metadata"] = meta
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise WhatIfError(f"{where}.spec", "required")
    pool = spec.get("pool")
    if not isinstance(pool, Mapping) or PLACEHOLDER not in str(pool.get("name") or ""):
        raise WhatIfError(
            f"{where}.spec.pool.name",
            f"must contain {PLACEHOLDER}: every added node publishes a pool of its own",
        )
    node_name = spec.get("nodeName")
    if node_name is not None and node_name != PLACEHOLDER:
        raise WhatIfError(f"{where}.spec.nodeName", f"must be {PLACEHOLDER} (or left out)")
    return _normalized(obj, kind="ResourceSlice", where=where)


def parse_shape(value: Any, *, where: str) -> JSON:
    """{"node": Node or {labels}, "slices": [ResourceSlice, ...]}, checked and normalized."""
    if not isinstance(value, Mapping):
        raise WhatIfError(where, "expected {node: {...}, slices: [...]}")
    unknown = sorted(set(value) - {"node", "slices"})
    if unknown:
        raise WhatIfError(f"{where}.{unknown[0]}", "unknown key (use node and slices)")
    slices = value.get("slices")
    if not isinstance(slices, list) or not slices:
        raise WhatIfError(f"{where}.slices", "expected a non-empty list of ResourceSlices")
    if len(slices) > MAX_SHAPE_SLICES:
        raise WhatIfError(f"{where}.slices", f"at most {MAX_SHAPE_SLICES} slices")
    checked = [_slice(s, where=f"{where}.slices[{i}]") for i, s in enumerate(slices)]
    names = [s["metadata"]["name"] for s in checked]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise WhatIfError(f"{where}.slices", f"two slices are named {duplicate!r}")
    return {"node": _node(value.get("node"), where=f"{where}.node"), "slices": checked}


def shape_devices(shape: JSON) -> int:
    """Devices one node of a checked shape brings."""
    return sum(len((s.get("spec") or {}).get("devices") or []) for s in shape["slices"])


def stamp(shape: JSON, name: str) -> tuple[JSON, list[JSON]]:
    """The node and slices of one added node called `name`."""
    node = substitute(shape["node"], PLACEHOLDER, name)
    slices = [substitute(s, PLACEHOLDER, name) for s in shape["slices"]]
    return node, slices
