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
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dralib.allocator.allocator import Allocator
from dralib.allocator.cel import attribute_converts
from dralib.allocator.cel.projection import projection_of
from dralib.allocator.explain import RequestReport
from dralib.allocator.nodeselection import NodeInfo
from dralib.allocator.pools import Pool
from dralib.allocator.slices import SliceInfo
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


_NUMBERS = itertools.count()


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


def prepare_slices(slices: Sequence[SliceInfo]) -> None:
    """Read what keys take of these slices now (a start-up), not in the first question."""
    # A read cluster's equal attribute values are mostly one object (claims.whatif.rows'
    # share_equal) and its attribute names a few strings: each is looked at once here, not once
    # per device (800,000 attribute values at 5,000 nodes). The memo holds the values it names,
    # so their ids stay theirs while it lives.
    memo = _PartsMemo({}, {})
    for info in slices:
        _slice_parts(info, memo)


@dataclass(frozen=True)
class _PartsMemo:
    """Per attribute value object: (the value, whether it converts); per (driver, attribute
    name): its (domain, identifier)."""

    converts: dict[int, tuple[Any, bool]]
    names: dict[tuple[str, Any], tuple[str, str]]


def _slice_parts(info: SliceInfo, memo: _PartsMemo | None = None) -> _SliceParts:
    parts: _SliceParts | None = info.key_parts
    if parts is not None:
        return parts
    memo = memo or _PartsMemo({}, {})
    converts, names = memo.converts, memo.names
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
            pair = names.get((driver, name))
            if pair is None:
                domain, slash, ident = str(name).partition("/")
                pair = names[(driver, name)] = (domain, ident) if slash else (driver, str(name))
            domains.add(pair[0])
            columns.setdefault(pair, []).append((index, name, value))
            # One attribute that is no CEL value fails every selector on the device.
            if not fails:
                known = converts.get(id(value))
                if known is None:
                    known = converts[id(value)] = (value, attribute_converts(value))
                fails = not known[1]
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
    # Kept on the slice: SliceCache keeps parsed slices across views and allocators.
    info.key_parts = parts
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
        self._pools: dict[str, list[Pool]] = {}
        # Per (attributes, selections), per node-local pool: (content id, whether in use).
        self._contents: dict[Any, dict[PoolKey, tuple[int, bool]]] = {}
        self._content_ids: dict[tuple[Any, ...], int] = {}
        # Per node-local pool in use: what is allocated of its devices, by device position.
        self._states: dict[PoolKey, tuple[Any, ...]] = {}
        self._held: dict[PoolKey, dict[tuple[int, int], Any]] = {}
        self._saved: dict[PoolKey, tuple[Any, Any]] = {}
        self._device_positions: dict[PoolKey, dict[str, list[tuple[int, int]]]] = {}

    def owner(self, pool: PoolKey) -> str | None:
        """The node whose slices make up the pool alone, None for a pool other nodes see."""
        return self._owner.get(pool)

    def _used_by(self, relevant: Relevant, wanted: Selections) -> dict[Any, bool]:
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
        explanation counts them. What a pool's slices hold is read once per question's
        attributes, what is allocated of it once per change (`forget_pools`).
        """
        pools = self._pools.get(node.name)
        if pools is None:
            pools = self._pools[node.name] = self.allocator.pools_for(node)
        contents = self._contents.get((relevant, wanted))
        if contents is None:
            if len(self._contents) >= 8:
                self._contents.clear()
                self._content_ids.clear()
            contents = self._contents[(relevant, wanted)] = {}
        entries: list[Any] = []
        local: list[PoolKey] = []
        positions: dict[str, int] = {}
        for pool in pools:
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
            content = contents.get(pool_key)
            if content is None:
                content = contents[pool_key] = self._content(pool, relevant, wanted)
            content_id, in_use = content
            if in_use:
                state = self._states.get(pool_key)
                if state is None:
                    state = self._states[pool_key] = self._state(pool_key)
                entries.append((position, content_id, state))
            else:
                entries.append((position, content_id))
            local.append(pool_key)
        return NodeKey(key=tuple(entries), local=tuple(local))

    def _content(
        self, pool: Pool, relevant: Relevant, wanted: Selections | None
    ) -> tuple[int, bool]:
        """(id of what the search can see of a node-local pool, whether it can use a device)."""
        infos = self._slices[(pool.driver, pool.name)]
        slice_keys = tuple(_slice_key(info, relevant) for info in infos)
        in_use = True
        if wanted is not None:
            used = self._used_by(relevant, wanted)
            in_use = False
            for info, slice_key in zip(infos, slice_keys, strict=True):
                found = used.get(slice_key)
                if found is None:
                    found = used[slice_key] = self._slice_used(info, wanted)
                if found:
                    in_use = True
                    break
        flags = (pool.driver, pool.is_incomplete, pool.is_invalid, pool.invalid_reason)
        if in_use:
            value: tuple[Any, ...] = (*flags, slice_keys)
        else:
            value = (*flags, "unused", sum(len(info.devices) for info in pool.slices))
        content_id = self._content_ids.get(value)
        if content_id is None:
            # Numbers are never given twice: keys made before a clear cannot meet new ones.
            content_id = self._content_ids[value] = next(_NUMBERS)
        return content_id, in_use

    def _state(self, pool_key: PoolKey) -> tuple[Any, ...]:
        holding = self.allocator.allocated_state.holding
        driver, name = pool_key
        held: dict[tuple[int, int], Any] = {}
        for slice_index, info in enumerate(self._slices[pool_key]):
            for device_index, device in enumerate(info.devices):
                found = holding((driver, name, device.name))
                if found is not None:
                    held[(slice_index, device_index)] = found
        self._held[pool_key] = held
        return tuple(sorted(held.items()))

    def _positions(self, pool_key: PoolKey) -> dict[str, list[tuple[int, int]]]:
        positions = self._device_positions.get(pool_key)
        if positions is None:
            positions = self._device_positions[pool_key] = {}
            for slice_index, info in enumerate(self._slices[pool_key]):
                for device_index, device in enumerate(info.devices):
                    positions.setdefault(device.name, []).append((slice_index, device_index))
        return positions

    def changed(self, devices: Iterable[tuple[str, str, str]]) -> set[PoolKey]:
        """What is allocated of these devices changed; returns their node-local pools.

        A pool's state is updated for the devices alone, and its state before the first change
        is kept for `restore` (placements are tried, then forgotten, question after question).
        """
        holding = self.allocator.allocated_state.holding
        pools: set[PoolKey] = set()
        for device_id in devices:
            pool_key = (device_id[0], device_id[1])
            if self._owner.get(pool_key) is None:
                continue
            pools.add(pool_key)
            held = self._held.get(pool_key)
            saved = self._saved.get(pool_key)
            if saved is None:
                saved = self._saved[pool_key] = (self._states.get(pool_key), held)
            if held is None:
                continue  # read whole when a key needs it
            if held is saved[1]:
                # Copied on the first change only: `restore` gives the saved one back.
                held = dict(held)
            found = holding(device_id)
            for position in self._positions(pool_key).get(device_id[2], ()):
                if found is None:
                    held.pop(position, None)
                else:
                    held[position] = found
            self._held[pool_key] = held
            self._states[pool_key] = tuple(sorted(held.items()))
        return pools

    def restore(self) -> None:
        """The allocated state is again what it was before the changes since `commit`."""
        for pool_key, (state, held) in self._saved.items():
            if state is None or held is None:
                self._states.pop(pool_key, None)
                self._held.pop(pool_key, None)
            else:
                self._states[pool_key] = state
                self._held[pool_key] = held
        self._saved.clear()

    def commit(self) -> None:
        """The changes so far are the state `restore` goes back to."""
        self._saved.clear()


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
    node_form: JSON | None = None
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
                node_form = node_form or _node_form(node)
                translated[field_name] = node_form
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
        out.append(
            RequestReport(
                claim=report.claim,
                request=report.request,
                wanted=report.wanted,
                stages=list(report.stages),
                blocking_stage=report.blocking_stage,
                message=report.message,
                taken=taken,
            )
        )
    return out


def reports_translate(reports: Sequence[RequestReport], local: Sequence[PoolKey]) -> bool:
    """Whether `translate_reports` is exact: no message names one of the node's own pools
    (`local`; explain names invalid and incomplete pools), none is an error."""
    names = [f"{driver}/{pool}" for driver, pool in local]
    return all(
        report.claim and not any(name in report.message for name in names) for report in reports
    )
