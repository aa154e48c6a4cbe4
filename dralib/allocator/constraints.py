"""Claim constraints: matchAttribute and distinctAttribute (upstream constraint.go).

Constraints are checked as devices are added during the search and must be monotonic: once a
constraint rejects a device, adding more devices never makes it accept. Every successful `add`
is paired with exactly one `remove` with the same arguments when the search backtracks.
"""

from __future__ import annotations

from typing import Any, cast

from dralib.allocator.slices import DeviceInfo

_SCALAR_KINDS = ("string", "int", "bool", "version")
_LIST_KINDS = (("ints", "int"), ("bools", "bool"), ("strings", "string"), ("versions", "version"))
_MISSING = object()

# (kind, values): the set form of an attribute, kinds as in the scalar keys.
AttributeSet = tuple[str, frozenset[Any]]


def lookup_attribute(device: DeviceInfo, name: str) -> dict[str, Any] | None:
    """The attribute by fully qualified name, or by its short name if the domain is the driver."""
    cached = device.attribute_lookups.get(name, _MISSING)
    if cached is not _MISSING:
        return cast("dict[str, Any] | None", cached)
    attributes = device.attributes
    found = attributes.get(name)
    if found is None and "/" in name:
        domain, _, short = name.partition("/")
        if domain == device.driver:
            found = attributes.get(short)
    if found is not None and not isinstance(found, dict):
        found = None
    device.attribute_lookups[name] = found
    return found


def lookup_attribute_set(device: DeviceInfo, name: str) -> AttributeSet | None:
    """The set form of the attribute looked up by name, cached on the device."""
    key = "\x00set\x00" + name
    lookups = device.attribute_lookups
    if key in lookups:
        return cast("AttributeSet | None", lookups[key])
    attribute = lookup_attribute(device, name)
    result = attribute_as_set(attribute) if attribute is not None else None
    lookups[key] = result
    return result


def attribute_as_set(attribute: dict[str, Any]) -> AttributeSet | None:
    """Lists and scalars as a set of values; None for an attribute of unknown type."""
    for key, kind in _LIST_KINDS:
        values = attribute.get(key)
        if values:
            return kind, frozenset(values)
    for kind in _SCALAR_KINDS:
        value = attribute.get(kind)
        if value is not None:
            return kind, frozenset((value,))
    return None


def _scalar(attribute: dict[str, Any]) -> tuple[str, Any] | None:
    for kind in _SCALAR_KINDS:
        value = attribute.get(kind)
        if value is not None:
            return kind, value
    return None


class Constraint:
    """Common part: which requests a constraint applies to."""

    def __init__(self, *, request_names: list[str], attribute_name: str, list_types: bool) -> None:
        self.request_names = set(request_names)
        self.attribute_name = attribute_name
        self.list_types = list_types
        self.num_devices = 0

    def applies(self, request_name: str, sub_request_name: str) -> bool:
        """True if the constraint covers the (sub)request; no names means all requests."""
        names = self.request_names
        if not names or request_name in names:
            return True
        return bool(sub_request_name) and f"{request_name}/{sub_request_name}" in names

    def add(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> bool:
        """Check the device and, if it fits, count it in."""
        raise NotImplementedError

    def remove(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> None:
        """Undo a successful add."""
        raise NotImplementedError


class MatchAttributeConstraint(Constraint):
    """All devices must have the same value (with list types: a common value)."""

    def __init__(self, *, request_names: list[str], attribute_name: str, list_types: bool) -> None:
        super().__init__(
            request_names=request_names, attribute_name=attribute_name, list_types=list_types
        )
        self.attribute: dict[str, Any] | None = None
        self.intersection: AttributeSet | None = None

    def add(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> bool:
        if not self.applies(request_name, sub_request_name):
            return True
        attribute = lookup_attribute(device, self.attribute_name)
        if attribute is None:
            return False
        if self.num_devices == 0:
            if self.list_types:
                self.intersection = lookup_attribute_set(device, self.attribute_name)
                if self.intersection is None:
                    return False
            else:
                self.attribute = attribute
            self.num_devices = 1
            return True
        if self.list_types:
            new = lookup_attribute_set(device, self.attribute_name)
            current = self.intersection
            if new is None or current is None or new[0] != current[0]:
                return False
            common = current[1] & new[1]
            if not common:
                return False
            self.intersection = (current[0], common)
        else:
            scalar = _scalar(attribute)
            if scalar is None or self.attribute is None:
                return False
            kind, value = scalar
            if self.attribute.get(kind) is None or self.attribute[kind] != value:
                return False
        self.num_devices += 1
        return True

    def remove(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> None:
        if not self.applies(request_name, sub_request_name):
            return
        # Like upstream, the intersection is not widened again: it only matters while the first
        # device stays, and a new first device resets it.
        self.num_devices -= 1


class DistinctAttributeConstraint(Constraint):
    """All devices must have different values (with list types: pairwise disjoint values).

    Like upstream, the values seen are remembered per request name, so a later device of the
    same request replaces the earlier one's entry.
    """

    def __init__(self, *, request_names: list[str], attribute_name: str, list_types: bool) -> None:
        super().__init__(
            request_names=request_names, attribute_name=attribute_name, list_types=list_types
        )
        self.attributes: dict[str, dict[str, Any]] = {}

    def add(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> bool:
        if not self.applies(request_name, sub_request_name):
            return True
        attribute = lookup_attribute(device, self.attribute_name)
        if attribute is None:
            return False
        if self.num_devices > 0 and not self._distinct(attribute):
            return False
        self.attributes[request_name] = attribute
        self.num_devices += 1
        return True

    def _distinct(self, attribute: dict[str, Any]) -> bool:
        if self.list_types:
            new = attribute_as_set(attribute)
            if new is None:
                return False
            for existing in self.attributes.values():
                other = attribute_as_set(existing)
                if other is None:
                    continue
                if new[0] == other[0] and new[1] & other[1]:
                    return False
            return True
        scalar = _scalar(attribute)
        if scalar is None:
            return not self.attributes
        kind, value = scalar
        for existing in self.attributes.values():
            if existing.get(kind) is not None and existing[kind] == value:
                return False
        return True

    def remove(self, request_name: str, sub_request_name: str, device: DeviceInfo) -> None:
        if not self.applies(request_name, sub_request_name):
            return
        self.attributes.pop(request_name, None)
        self.num_devices -= 1
