"""What of a device a selector reads, so that devices alike in that part share one evaluation.

Most selectors read the driver and a few named attributes (`device.driver == "gpu.example.com"`,
`device.attributes["gpu.example.com"].type == "gpu"`). Devices differ in other attributes (a
UUID, an index), so results cached per whole device content are computed once per device; cached
per the part the selector reads, they are computed once per kind of device. Building a device's
CEL input and activation costs several times the evaluation itself, and a 1,000-node cluster
holds tens of thousands of devices.

`projection_of` accepts an expression only when every mention of `device` is one of these
accesses: `device.driver`, `device.attributes["domain"].name` (not followed by a call: that would
be a macro or method on the whole map) and `device.attributes["domain"]["name"]`. Any other use
(the capacity, a comprehension over the device or its attributes, `device` inside a string
literal) keeps the full evaluation. For an accepted expression, `Projection.project` returns the
key of the device's relevant part and the minimal CEL input holding exactly that part, built
from the device's full input: a domain the device has appears (with only the named attributes
it has), a domain it lacks does not, as in the full input; so the same program gives the same
answer or the same error on either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Projection", "projection_of"]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_STRING = r'"([^"\\]*)"'
_ACCESS = re.compile(
    r"\bdevice\s*\.\s*(?:"
    r"(driver)\b"
    rf"|attributes\s*\[\s*{_STRING}\s*\]\s*(?:\.\s*({_IDENT})\b(?!\s*\()"
    rf"|\[\s*{_STRING}\s*\]))"
)
_DEVICE = re.compile(r"\bdevice\b")
_RAW_FIELDS = frozenset({"string", "int", "bool"})


@dataclass(frozen=True)
class Projection:
    """The attributes (domain, name) a selector reads, besides the driver."""

    attributes: tuple[tuple[str, str], ...]

    def project(self, value: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(key, minimal input) of a device's full CEL input `{"device": {...}}`.

        Raises TypeError when a value cannot be part of a key (the caller then evaluates the
        full input).
        """
        device = value["device"]
        attributes = device["attributes"]
        minimal_attributes: dict[str, dict[str, Any]] = {}
        key: list[Any] = [device["driver"]]
        for domain, name in self.attributes:
            present = attributes.get(domain)
            if present is None:
                key.append((domain, None))
                continue
            values = minimal_attributes.setdefault(domain, {})
            if name in present:
                item = present[name]
                values[name] = item
                key.append((domain, name, _hashable(item)))
            else:
                key.append((domain, name))
        minimal = {key_: device[key_] for key_ in device if key_ not in ("attributes", "capacity")}
        minimal["attributes"] = minimal_attributes
        minimal["capacity"] = {}
        return tuple(key), {"device": minimal}

    def raw_key(
        self, driver: str, attributes: Mapping[str, Mapping[str, Any]], domains: tuple[str, ...]
    ) -> tuple[Any, ...] | None:
        """The key `project` gives, read from a device's raw attributes, or None.

        Only for a device whose attributes all have the plain one-field shape (`{"string":
        "a100"}`) with a value of its exact type, so that each CEL value is the raw value itself;
        `domains` are the domains its attributes name. None when the raw names cannot answer
        alone (a name under both its qualified and its bare form, a `/` in a wanted domain).
        """
        key: list[Any] = [driver]
        for domain, name in self.attributes:
            if domain not in domains:
                key.append((domain, None))
                continue
            if "/" in domain:
                return None
            attribute = attributes.get(f"{domain}/{name}")
            if domain == driver and "/" not in name:
                bare = attributes.get(name)
                if bare is not None:
                    if attribute is not None:
                        return None
                    attribute = bare
            if attribute is None:
                key.append((domain, name))
                continue
            ((field_name, raw),) = attribute.items()
            if field_name not in _RAW_FIELDS:
                return None  # a version: its CEL value is not the raw text
            key.append((domain, name, (type(raw).__name__, raw)))
        return tuple(key)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return ("list", *(_hashable(v) for v in value))
    hash(value)
    # The type too: 1 and True (and 1.0) are equal keys in Python but not in CEL.
    return (type(value).__name__, value)


def projection_of(expression: str) -> Projection | None:
    """The projection of a selector, or None when it reads more of the device than it covers."""
    wanted: list[tuple[str, str]] = []
    for match in _ACCESS.finditer(expression):
        if match.group(1):
            continue
        domain = match.group(2)
        name = match.group(3) if match.group(3) is not None else match.group(4)
        if (domain, name) not in wanted:
            wanted.append((domain, name))
    remainder = _ACCESS.sub(" ", expression)
    if _DEVICE.search(remainder):
        return None
    return Projection(tuple(wanted))
