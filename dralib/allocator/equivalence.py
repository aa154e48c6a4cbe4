"""Node keys for the allocator: nodes with equal keys get the same answer, up to pool names.

`Allocator.allocate(node, claims)` reads of a node only the pools it can use, in search order,
and the allocated state of their devices. A fleet's nodes mostly carry the same devices, each
in pools named after the node, so a caller can ask the allocator for the first node of a class
and translate the answer for the others (`translate_results`, `translate_reports`).

A key (`NodeKeys.key`) holds, per pool the node sees:

- a pool whose slices all name this node (node-local): its driver, which of the node's pools
  share its name (the allocator keys available counters by pool name alone), whether it is
  complete and valid, the content of its slices without their names, node and pool names, and
  the allocated state of its devices. Device content is read through what the question's
  selectors and constraints can see (`relevant_attributes`): devices differing only in an
  attribute nobody asks about (a UUID, a MAC address) are alike.
- any other pool (allNodes, nodeSelector): the built pool object itself, which is one object for
  every node served by the same slices; its allocated state is the same for every node, so a
  caller must not compare keys taken across a change of it.

A node gets no key (it is its own class) when a pool uses per-device node selection, or when a
node-local pool's name is also used by a pool of another node.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from dralib.allocator.allocator import Allocator
from dralib.allocator.cel import attribute_converts
from dralib.allocator.cel.projection import projection_of
from dralib.allocator.explain import RequestReport
from dralib.allocator.nodeselection import NodeInfo
from dralib.allocator.pools import SliceInfo
from dralib.allocator.types import JSON, AllocationError

# Sorted (domain, name) of the attributes selectors and constraints read; None: all of them.
Relevant = tuple[tuple[str, str], ...] | None
# Per request (and subrequest): its class's and its own selector expressions.
Selections = tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
PoolKey = tuple[str, str]


@dataclass(frozen=True)
class NodeKey:
    """A node's key and its node-local pools, in the order the key lists them."""

    key: tuple[Any, ...]
    local: tuple[PoolKey, ...]


@dataclass(frozen=True)
class _SliceParts:
    # Digest of the slice without names and attributes; per attribute (domain, name), the
    # digest of its values across the devices.
    base: bytes
    columns: dict[tuple[str, str], bytes]


# Per parsed slice (SliceCache keeps them across views and allocators), computed on first use.
_PARTS: weakref.WeakKeyDictionary[SliceInfo, _SliceParts] = weakref.WeakKeyDictionary()


def relevant_attributes(classes: Mapping[str, JSON], claims: Sequence[JSON]) -> Relevant:
    """The device attributes the claims' selectors (their classes' too) and constraints read.

    None when one of them reads more than named attributes (see `cel.projection`): then a
    device's whole content matters.
    """
    pairs: set[tuple[str, str]] = set()
    expressions: list[Any] = []
    for claim in claims:
        devices = (
            ((claim.get("spec") or {}).get("devices") or {}) if isinstance(claim, dict) else {}
        )
        if not isinstance(devices, dict):
            return None
        for request in devices.get("requests") or []:
            if not isinstance(request, dict):
                return None
            views = [request, request.get("exactly"), *(request.get("firstAvailable") or [])]
            for view in views:
                if not isinstance(view, dict):
                    continue
                device_class = classes.get(str(view.get("deviceClassName") or ""))
                class_spec = (device_class or {}).get("spec") or {}
                for selectors in (class_spec.get("selectors"), view.get("selectors")):
                    for selector in selectors or []:
                        if not isinstance(selector, dict):
                            return None
                        expressions.append((selector.get("cel") or {}).get("expression", ""))
        for constraint in devices.get("constraints") or []:
            if not isinstance(constraint, dict):
                return None
            for field_name in ("matchAttribute", "distinctAttribute"):
                name = constraint.get(field_name)
                if name is None:
                    continue
                domain, slash, ident = str(name).partition("/")
                if not slash:
                    return None  # looked up by its bare form: which domain depends on the driver
                pairs.add((domain, ident))
    for expression in expressions:
        projection = projection_of(str(expression))
        if projection is None:
            return None
        pairs.update(projection.attributes)
    return tuple(sorted(pairs))


def _expressions(selectors: Any) -> tuple[str, ...]:
    # As the allocator reads them (candidates.check_request), so selection results are shared.
    return tuple(
        str((s.get("cel") or {}).get("expression", "")) if isinstance(s, dict) else ""
        for s in selectors or []
    )


def selections(
    classes: Mapping[str, JSON], claims: Sequence[JSON], *, own: bool = True
) -> Selections | None:
    """Per request view of the claims, the selectors a device must pass (with `own` False: the
    class's only); None when a request names no known class."""
    out = []
    for claim in claims:
        devices = (
            ((claim.get("spec") or {}).get("devices") or {}) if isinstance(claim, dict) else {}
        )
        for request in (devices.get("requests") or []) if isinstance(devices, dict) else []:
            if not isinstance(request, dict):
                return None
            views = [request.get("exactly"), *(request.get("firstAvailable") or [])]
            for view in views:
                if not isinstance(view, dict):
                    continue
                device_class = classes.get(str(view.get("deviceClassName") or ""))
                if device_class is None:
                    return None
                class_exprs = _expressions((device_class.get("spec") or {}).get("selectors"))
                out.append((class_exprs, _expressions(view.get("selectors")) if own else ()))
    return tuple(dict.fromkeys(out))


def _digest(value: Any) -> bytes:
    try:
        text = orjson.dumps(value)
    except TypeError:
        text = repr(value).encode()
    else:
        if b"null" in text:
            # orjson writes NaN as null too: keep the two apart.
            text = repr(value).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def _slice_parts(info: SliceInfo) -> _SliceParts:
    parts = _PARTS.get(info)
    if parts is not None:
        return parts
    spec = info.raw.get("spec") or {}
    driver = info.driver
    stripped: list[Any] = []
    columns: dict[tuple[str, str], list[Any]] = {}
    for index, device in enumerate(spec.get("devices") or []):
        attributes = device.get("attributes") if isinstance(device, dict) else None
        if not isinstance(attributes, dict):
            stripped.append(device)
            continue
        domains: set[str] = set()
        fails = False
        for name, value in attributes.items():
            domain, slash, ident = str(name).partition("/")
            pair = (domain, ident) if slash else (driver, str(name))
            domains.add(pair[0])
            columns.setdefault(pair, []).append((index, name, value))
            # One attribute that is no CEL value fails every selector on the device.
            fails = fails or not attribute_converts(value)
        rest = {k: v for k, v in device.items() if k != "attributes"}
        rest[" domains"] = sorted(domains)
        rest[" fails"] = fails
        stripped.append(rest)
    pool = spec.get("pool")
    base = {k: v for k, v in spec.items() if k not in ("nodeName", "pool", "devices")}
    base[" pool"] = (
        {k: v for k, v in pool.items() if k != "name"} if isinstance(pool, dict) else pool
    )
    base[" devices"] = stripped
    parts = _SliceParts(
        base=_digest(base),
        columns={pair: _digest(values) for pair, values in columns.items()},
    )
    _PARTS[info] = parts
    return parts


def _slice_key(info: SliceInfo, relevant: Relevant) -> tuple[bytes, tuple[Any, ...]]:
    parts = _slice_parts(info)
    if relevant is None:
        return parts.base, tuple(sorted(parts.columns.items()))
    return parts.base, tuple(parts.columns.get(pair) for pair in relevant)


class NodeKeys:
    """Keys of nodes for one allocator (see the module docstring); cheap next to a search."""

    def __init__(self, allocator: Allocator) -> None:
        self.allocator = allocator
        by_pool: dict[PoolKey, list[SliceInfo]] = {}
        for info in allocator.slices:
            by_pool.setdefault((info.driver, info.pool), []).append(info)
        self._slices = {key: sorted(infos, key=lambda i: i.name) for key, infos in by_pool.items()}
        self._owner: dict[PoolKey, str | None] = {}
        name_owner: dict[str, str | None] = {}
        for key, infos in by_pool.items():
            nodes = {info.node_name for info in infos}
            owner = next(iter(nodes)) if len(nodes) == 1 else None
            self._owner[key] = owner or None
            name_owner[key[1]] = owner if name_owner.get(key[1], owner) == owner else None
        # A pool name's available counters are one cache entry: only a name no other node
        # uses can be translated.
        self._name_owner = name_owner
        self.per_device_selection = {
            key for key, infos in by_pool.items() if any(i.per_device_node_selection for i in infos)
        }
        # Per (attributes, selections): per slice key, whether a device of it can be selected.
        self._used: dict[Any, dict[Any, bool]] = {}

    def owner(self, pool: PoolKey) -> str | None:
        """The node whose slices make up the pool alone, None for a pool other nodes see."""
        return self._owner.get(pool)

    def _used_by(self, relevant: Relevant, wanted: Selections | None) -> dict[Any, bool] | None:
        if wanted is None:
            return None
        used = self._used.get((relevant, wanted))
        if used is None:
            if len(self._used) >= 8:
                self._used.clear()
            used = self._used[(relevant, wanted)] = {}
        return used

    def _slice_used(self, info: SliceInfo, wanted: Selections) -> bool:
        select = self.allocator.selector_cache.select
        try:
            return any(
                select(class_exprs, request_exprs, device) is not False
                for device in info.devices
                for class_exprs, request_exprs in wanted
            )
        except AllocationError:
            return True  # a device the allocator cannot read: the search says so itself

    def key(
        self, node: NodeInfo, relevant: Relevant, wanted: Selections | None = None
    ) -> NodeKey | None:
        """The node's key, or None when it must be asked on its own.

        With `wanted`, the selectors of the question (`selections`), a node-local pool no device
        of which passes them counts only by its size: the search skips its devices and the
        explanation counts them.
        """
        used = self._used_by(relevant, wanted)
        holding = self.allocator.allocated_state.holding
        entries: list[Any] = []
        local: list[PoolKey] = []
        positions: dict[str, int] = {}
        for pool in self.allocator.pools_for(node):
            pool_key = (pool.driver, pool.name)
            position = positions.setdefault(pool.name, len(positions))
            if pool_key in self.per_device_selection:
                return None
            owner = self._owner.get(pool_key)
            if owner is None:
                # Built pools are shared by the nodes served by the same slices; an incomplete
                # pool is made anew for each node, and offers nothing to any.
                shared = ("incomplete", *pool_key) if pool.is_incomplete else id(pool)
                entries.append((shared, position))
                continue
            if owner != node.name or self._name_owner.get(pool.name) != node.name:
                return None
            infos = self._slices[pool_key]
            slice_keys = tuple(_slice_key(info, relevant) for info in infos)
            if used is not None and wanted is not None:
                in_use = False
                for info, slice_key in zip(infos, slice_keys, strict=True):
                    found = used.get(slice_key)
                    if found is None:
                        found = used[slice_key] = self._slice_used(info, wanted)
                    if found:
                        in_use = True
                        break
                if not in_use:
                    size = sum(len(info.devices) for info in pool.slices)
                    flags = (pool.is_incomplete, pool.is_invalid, pool.invalid_reason)
                    entries.append((pool.driver, position, *flags, "unused", size))
                    local.append(pool_key)
                    continue
            state = []
            for slice_index, info in enumerate(infos):
                for device_index, device in enumerate(info.devices):
                    held = holding((pool.driver, pool.name, device.name))
                    if held is not None:
                        state.append((slice_index, device_index, held))
            entries.append(
                (
                    pool.driver,
                    position,
                    pool.is_incomplete,
                    pool.is_invalid,
                    pool.invalid_reason,
                    slice_keys,
                    tuple(state),
                )
            )
            local.append(pool_key)
        return NodeKey(key=tuple(entries), local=tuple(local))


def pool_names(first: NodeKey, other: NodeKey) -> dict[PoolKey, str]:
    """(driver, pool of the first node) -> pool of the other node, for equal keys."""
    return {key: theirs[1] for key, theirs in zip(first.local, other.local, strict=True)}


def _node_form(node: str) -> JSON:
    # What build_result writes for devices bound to one node (_node_selector).
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


def translate_results(
    results: Sequence[JSON],
    *,
    names: Mapping[PoolKey, str],
    first_node: str,
    node: str,
    share_id: Any,
) -> list[JSON]:
    """AllocationResults of the first node of a class, as the allocator gives them for `node`.

    Pool names are mapped, a device share gets a new `share_id()`, and the nodeSelector naming
    the first node names this one; any other nodeSelector comes from slices both nodes see.
    """
    first_form = _node_form(first_node)
    out: list[JSON] = []
    for allocation in results:
        translated: JSON = {}
        for field_name, value in allocation.items():
            if field_name == "devices":
                devices = dict(value)
                entries = []
                for entry in value.get("results") or []:
                    entry = dict(entry)
                    mapped = names.get((entry["driver"], entry["pool"]))
                    if mapped is not None:
                        entry["pool"] = mapped
                    if "shareID" in entry:
                        entry["shareID"] = share_id()
                    entries.append(entry)
                devices["results"] = entries
                if "config" in value:
                    devices["config"] = [dict(c) for c in value["config"]]
                translated["devices"] = devices
            elif field_name == "nodeSelector" and value == first_form:
                translated[field_name] = _node_form(node)
            else:
                translated[field_name] = value
        out.append(translated)
    return out


def translate_reports(
    reports: Sequence[RequestReport], *, names: Mapping[PoolKey, str]
) -> list[RequestReport]:
    """The first node's explain reports for another node of its class (`taken` names pools)."""
    out = []
    for report in reports:
        taken = [
            (driver, names.get((driver, pool), pool), device, stage)
            for driver, pool, device, stage in report.taken
        ]
        out.append(replace(report, taken=taken, stages=list(report.stages)))
    return out


def reports_translate(reports: Sequence[RequestReport]) -> bool:
    """Whether `translate_reports` is exact: no report names a pool in its message."""
    return all(
        report.claim and "pools: " not in report.message and "error" not in report.message[:6]
        for report in reports
    )
