"""What-if options: node restriction, copy count, features and assumed changes, checked.

Every bad value is a `WhatIfError` naming the option (`count`, `nodeSelector`, `assume[2].node`).

Node selectors are parsed by `dralib.kube.selectors` (shared with the fake API server);
`Requirement` is re-exported here because `Options.node_selector` holds them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claims.whatif.inputs import JSON, WhatIfError
from claims.whatif.shapes import parse_shape, shape_devices
from dralib.allocator import Features, ScenarioError
from dralib.kube.selectors import Requirement, SelectorError, parse_label_selector

__all__ = [
    "ASSUME_OPS",
    "MAX_ADDED_DEVICES",
    "MAX_ADDED_NODES",
    "MAX_ASSUME",
    "MAX_COUNT",
    "MAX_NODES_LIMIT",
    "MAX_NODES_OFFSET",
    "NODES_LIMIT_DEFAULT",
    "REQUEST_KEYS",
    "Options",
    "Requirement",
    "check_added_devices",
    "parse_assume",
    "parse_count",
    "parse_features",
    "parse_flag",
    "parse_gang",
    "parse_node_selector",
    "parse_nodes",
    "parse_nodes_window",
    "parse_options",
]

# Keys of a what-if request (HTTP body or job payload), as the API spells them.
REQUEST_KEYS = (
    "yaml",
    "nodes",
    "nodeSelector",
    "count",
    "assume",
    "features",
    "namespace",
    "gang",
    "preemption",
    "nodesOffset",
    "nodesLimit",
)

MAX_COUNT = 10_000
MAX_ADDED_NODES = 1_000
# Devices all add-nodes changes of one request may add, in total: about 1.4 KB each once
# the simulation asked every node (more with many attributes), so some 30-100 MB at most.
# 1,000 nodes of 16 GPUs fit; 1,000 nodes of a 64-slice shape (up to 8 million devices) do not.
MAX_ADDED_DEVICES = 20_000
MAX_ASSUME = 100
# Per-node verdicts an answer holds when a door (API, page, job) is not told otherwise: the
# answer's size then does not grow with the cluster. `nodesLimit: all` asks for every node.
NODES_LIMIT_DEFAULT = 100
MAX_NODES_LIMIT = 10_000
# Past any cluster's node count (5,000 nodes plus at most MAX_ADDED_NODES assumed ones).
MAX_NODES_OFFSET = 1_000_000

# Operators of assumed changes; camelCase spellings are accepted too.
ASSUME_OPS = (
    "release-claim",
    "remove-node",
    "add-nodes",
    "taint-device",
    "untaint-device",
    "drop-pool",
)
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


@dataclass
class Options:
    """Checked options of one what-if request."""

    nodes: list[str] | None = None
    node_selector: list[Requirement] = field(default_factory=list)
    count: int = 1
    count_capped: bool = False
    assume: list[JSON] = field(default_factory=list)
    features: JSON = field(default_factory=dict)
    explain: bool = True
    # All the input's claims on one node, all or nothing (else pods are placed one by one).
    gang: bool = False
    # When the pod fits nowhere: the node and lower-priority pods preemption would evict.
    preemption: bool = False
    # The window of per-node verdicts the answer holds (`nodes`, `placements`); None: every node.
    nodes_offset: int = 0
    nodes_limit: int | None = None

    def feature_set(self) -> Features:
        return Features.from_dict(self.features)

    def canonical(self) -> JSON:
        """A JSON form for cache keys."""
        return {
            "nodes": self.nodes,
            "nodeSelector": [(r.key, r.operator, list(r.values)) for r in self.node_selector],
            "count": self.count,
            "assume": self.assume,
            "features": self.features,
            "explain": self.explain,
            "gang": self.gang,
            "preemption": self.preemption,
            "nodesOffset": self.nodes_offset,
            "nodesLimit": self.nodes_limit,
        }


def parse_node_selector(value: Any) -> list[Requirement]:
    """`k=v,k2!=v,k3,!k4,k5 in (a,b)` (kubectl -l syntax) or a {key: value} map."""
    if value is None or value == "":
        return []
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(item, str):
                raise WhatIfError(f"nodeSelector.{key}", "values must be strings")
            items.append(Requirement(str(key), "=", (item,)))
        return items
    if not isinstance(value, str):
        raise WhatIfError("nodeSelector", "expected `key=value,...` or a map")
    try:
        return parse_label_selector(value)
    except SelectorError as exc:
        raise WhatIfError("nodeSelector", f"{exc.term!r}: {exc.reason}") from exc


def parse_count(value: Any) -> tuple[int, bool]:
    """1..MAX_COUNT; "max" means MAX_COUNT; larger numbers are capped (second value True)."""
    if value is None or value == "":
        return 1, False
    if value == "max":
        return MAX_COUNT, False
    if isinstance(value, bool):
        raise WhatIfError("count", "expected a whole number")
    if isinstance(value, str):
        try:
            value = int(value.strip(), 10)
        except ValueError as exc:
            raise WhatIfError("count", f"expected a whole number, got {value!r}") from exc
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise WhatIfError("count", f"expected a whole number, got {value!r}")
    if value <= 0:
        raise WhatIfError("count", "must be at least 1")
    if value > MAX_COUNT:
        return MAX_COUNT, True
    return value, False


def _text(entry: Mapping[str, Any], key: str, *, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise WhatIfError(f"{where}.{key}", "required (a non-empty string)")
    return value.strip()


def _device_id(text: str, *, where: str) -> str:
    parts = text.split("/")
    if len(parts) < 3 or not all(parts):
        raise WhatIfError(where, f"{text!r} is not driver/pool/device")
    return text


def _op_name(raw: Any) -> str:
    name = re.sub(r"(?<!^)([A-Z])", r"-\1", str(raw)).lower()
    return name


def parse_assume(value: Any) -> list[JSON]:
    """Assumed changes, each {"op": ..., ...} (one change alone is a list of one); returns them
    in a canonical form."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise WhatIfError("assume", "expected a list of changes")
    if len(value) > MAX_ASSUME:
        raise WhatIfError("assume", f"at most {MAX_ASSUME} changes")
    changes: list[JSON] = []
    added = 0
    devices = 0
    for index, entry in enumerate(value):
        where = f"assume[{index}]"
        if not isinstance(entry, Mapping):
            raise WhatIfError(where, "expected an object with op")
        op = _op_name(entry.get("op") or "")
        if op not in ASSUME_OPS:
            raise WhatIfError(
                f"{where}.op", f"{entry.get('op')!r}: choose from {', '.join(ASSUME_OPS)}"
            )
        if op == "release-claim":
            claim = _text(entry, "claim", where=where)
            if "/" not in claim:
                raise WhatIfError(f"{where}.claim", "expected namespace/name")
            changes.append({"op": op, "claim": claim})
        elif op == "remove-node":
            changes.append({"op": op, "node": _text(entry, "node", where=where)})
        elif op == "add-nodes":
            count, _ = parse_count(entry.get("count", 1))
            added += count
            if count > MAX_ADDED_NODES or added > MAX_ADDED_NODES:
                raise WhatIfError(
                    f"{where}.count", f"at most {MAX_ADDED_NODES} added nodes per request"
                )
            change = _add_nodes(entry, count=count, where=where)
            if "shape" in change:
                # Copies of an existing node are counted when the cluster is at hand (build_view).
                devices = check_added_devices(
                    devices + count * shape_devices(change["shape"]), where=where
                )
            changes.append(change)
        elif op == "taint-device":
            device = _device_id(_text(entry, "device", where=where), where=f"{where}.device")
            taint = entry.get("taint") or {"key": entry.get("key"), "effect": entry.get("effect")}
            if not isinstance(taint, Mapping):
                raise WhatIfError(f"{where}.taint", "expected {key, value, effect}")
            key = _text(taint, "key", where=f"{where}.taint")
            effect = taint.get("effect") or "NoSchedule"
            if effect not in _TAINT_EFFECTS:
                raise WhatIfError(
                    f"{where}.taint.effect", f"choose from {', '.join(_TAINT_EFFECTS)}"
                )
            new_taint = {"key": key, "effect": effect}
            if taint.get("value"):
                new_taint["value"] = str(taint["value"])
            changes.append({"op": op, "device": device, "taint": new_taint})
        elif op == "untaint-device":
            device = _device_id(_text(entry, "device", where=where), where=f"{where}.device")
            key = entry.get("key")
            if key is not None and not isinstance(key, str):
                raise WhatIfError(f"{where}.key", "expected a taint key")
            changes.append({"op": op, "device": device, "key": key or ""})
        else:
            pool = _text(entry, "pool", where=where)
            if "/" not in pool:
                raise WhatIfError(f"{where}.pool", "expected driver/pool")
            changes.append({"op": op, "pool": pool})
    return changes


def check_added_devices(total: int, *, where: str) -> int:
    """`total` (devices added so far by a request's add-nodes changes) if within bounds."""
    if total > MAX_ADDED_DEVICES:
        raise WhatIfError(
            f"{where}.count",
            f"the added nodes would bring {total:,} devices; at most {MAX_ADDED_DEVICES:,} "
            "added devices per request",
        )
    return total


def _add_nodes(entry: Mapping[str, Any], *, count: int, where: str) -> JSON:
    """Copies of an existing node (`like`), or nodes of a pasted shape (`shape`, see
    `claims.whatif.shapes`), named `<namePrefix>-1`, `-2`, ..."""
    if ("like" in entry) == ("shape" in entry):
        raise WhatIfError(where, "give either like (a node to copy) or shape (a node type)")
    if "like" in entry:
        return {"op": "add-nodes", "like": _text(entry, "like", where=where), "count": count}
    prefix = entry.get("namePrefix", "whatif-node")
    if not isinstance(prefix, str) or not re.fullmatch(
        r"[a-z0-9]([-a-z0-9.]{0,200}[a-z0-9])?", prefix
    ):
        raise WhatIfError(f"{where}.namePrefix", "expected a DNS subdomain such as gpu-node")
    shape = parse_shape(entry.get("shape"), where=f"{where}.shape")
    return {"op": "add-nodes", "shape": shape, "count": count, "namePrefix": prefix}


def parse_features(value: Any) -> JSON:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WhatIfError("features", "expected a map of feature name to true/false")
    try:
        Features.from_dict(value)
    except ScenarioError as exc:
        raise WhatIfError("features", str(exc).removeprefix("features: ")) from exc
    return dict(sorted(value.items()))


def parse_flag(value: Any, *, field: str) -> bool:
    """true/false, also as the strings a query string or a form's checkbox carries."""
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0", "on"}:
        return value.strip().lower() in {"true", "1", "on"}
    raise WhatIfError(field, f"expected true or false, got {value!r}")


def parse_gang(value: Any) -> bool:
    """true/false, also as the strings a query string carries."""
    if isinstance(value, str) and value.strip().lower() == "on":
        raise WhatIfError("gang", f"expected true or false, got {value!r}")
    return parse_flag(value, field="gang")


def parse_nodes(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise WhatIfError("nodes", "expected a list of node names")
    return sorted(set(value)) if value else None


def _whole_number(value: Any, *, field: str) -> int:
    if isinstance(value, bool):
        raise WhatIfError(field, "expected a whole number")
    if isinstance(value, str):
        try:
            value = int(value.strip(), 10)
        except ValueError as exc:
            raise WhatIfError(field, f"expected a whole number, got {value!r}") from exc
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise WhatIfError(field, f"expected a whole number, got {value!r}")
    return value


def parse_nodes_window(offset: Any = 0, limit: Any = None) -> tuple[int, int | None]:
    """(nodesOffset, nodesLimit): 0..MAX_NODES_OFFSET, and 1..MAX_NODES_LIMIT or None for every
    node ("all", 0 or absent)."""
    start = 0 if offset is None or offset == "" else _whole_number(offset, field="nodesOffset")
    if not 0 <= start <= MAX_NODES_OFFSET:
        raise WhatIfError("nodesOffset", f"must be 0 to {MAX_NODES_OFFSET:,}")
    if limit is None or limit == "" or (isinstance(limit, str) and limit.strip() == "all"):
        return start, None
    size = _whole_number(limit, field="nodesLimit")
    if size == 0:
        return start, None
    if not 0 < size <= MAX_NODES_LIMIT:
        raise WhatIfError("nodesLimit", f"must be 1 to {MAX_NODES_LIMIT:,}, or all (0)")
    return start, size


def parse_options(
    *,
    nodes: Any = None,
    node_selector: Any = None,
    count: Any = 1,
    assume: Any = None,
    features: Any = None,
    explain: bool = True,
    gang: Any = False,
    preemption: Any = False,
    nodes_offset: Any = 0,
    nodes_limit: Any = None,
) -> Options:
    """Check every option; the first problem is raised as a WhatIfError."""
    checked_count, capped = parse_count(count)
    offset, limit = parse_nodes_window(nodes_offset, nodes_limit)
    return Options(
        nodes=parse_nodes(nodes),
        node_selector=parse_node_selector(node_selector),
        count=checked_count,
        count_capped=capped,
        assume=parse_assume(assume),
        features=parse_features(features),
        explain=bool(explain),
        gang=parse_gang(gang),
        preemption=parse_flag(preemption, field="preemption"),
        nodes_offset=offset,
        nodes_limit=limit,
    )
