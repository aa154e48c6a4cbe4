"""The ``device`` variable of a selector: what CEL sees of one device, built once and shared.

A ``DeviceInput`` (v1 ResourceSlice JSON shapes) becomes the CEL value of ``device`` (attribute
and capacity maps by domain, quantities and versions in the representation the package
docstring describes), or the error building it raised: a device whose input cannot be built
fails every selector, as upstream's conversion does. Values are kept per device and per
environment type, weakly; ``plain_domains`` tells the devices whose input cannot fail, which
projected selectors answer from the raw attributes without building it.

Threads: the values are shared by all threads, the CEL activations built from them are not:
cel_expr_python binds an activation to the arena of the thread that built it, so each thread
keeps its own (``_ThreadActivations``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dralib.allocator.cel import functions as fn

__all__ = [
    "DeviceData",
    "DeviceInput",
    "activation",
    "attribute_converts",
    "build_device",
    "device_data",
    "device_domains",
    "plain_domains",
]


@dataclass(frozen=True, eq=False)
class DeviceInput:
    """What a selector sees of one device (v1 ResourceSlice JSON shapes)."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_multiple_allocations: bool | None = None


class DeviceData:
    """The ``device`` value for one DeviceInput, or the error building it raised."""

    __slots__ = ("__weakref__", "error", "slot", "value")

    def __init__(self, value: dict[str, Any] | None, error: str | None) -> None:
        self.value = value
        self.error = error
        # The last thread's (token, activation): the common single-thread case skips the
        # per-thread lookup. One tuple is assigned at once, so a reader never pairs one
        # thread's token with another thread's activation.
        self.slot: tuple[object, Any] | None = None


class _ThreadActivations(threading.local):
    """Activations of the current thread, by device.

    Converting the Python value to CEL values once saves most of an evaluation's time, but an
    activation is bound to the arena of the thread that built it: cel_expr_python finds the
    arena of a Python function's result through a per-thread registry, so evaluating another
    thread's activation fails with "No PyCelArena found". Each thread therefore builds its own;
    they go away with the thread (weak keys) or with the device.
    """

    def __init__(self) -> None:
        self.token = object()
        self.activations: weakref.WeakKeyDictionary[DeviceData, Any] = weakref.WeakKeyDictionary()


_thread_activations = _ThreadActivations()


def activation(env: Any, data: DeviceData) -> Any:
    """This thread's CEL activation of a device's value in `env`, built on first use."""
    local = _thread_activations
    token = local.token
    slot = data.slot
    if slot is not None and slot[0] is token:
        return slot[1]
    built = local.activations.get(data)
    if built is None:
        built = env.Activation(data.value)
        local.activations[data] = built
    data.slot = (token, built)
    return built


_device_cache: weakref.WeakKeyDictionary[DeviceInput, dict[Hashable, DeviceData]] = (
    weakref.WeakKeyDictionary()
)


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


_SCALAR_CONVERSIONS: Final[dict[str, Any]] = {"string": str, "int": int, "bool": bool}


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _int64(raw: Any) -> int:
    # An attribute's int is an int64 (upstream's type, and CEL's): a larger one cannot be a CEL
    # value, so the device fails as a whole, whichever attribute a selector reads.
    value = int(raw)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} is out of the int64 range")
    return value


def _attribute_value(attr: Mapping[str, Any]) -> Any:
    # Like upstream, list values are exposed whether or not the list feature is on; the feature
    # only changes the declared types and adds includes().
    if attr.__class__ is dict and len(attr) == 1:
        # The common shape, one scalar field: the same value the general path below gives it,
        # without its chain of lookups (this runs for every attribute of every device).
        ((field_name, raw),) = attr.items()
        convert = _SCALAR_CONVERSIONS.get(field_name)
        if convert is not None and raw is not None:
            return _int64(raw) if convert is int else convert(raw)
    elif not isinstance(attr, Mapping):
        raise ValueError("unsupported attribute value")
    if attr.get("ints") is not None:
        return [_int64(value) for value in attr["ints"]]
    for key in ("bools", "strings"):
        if attr.get(key) is not None:
            return list(attr[key])
    if attr.get("versions") is not None:
        return [fn.semver_value(v) for v in attr["versions"]]
    if attr.get("int") is not None:
        return _int64(attr["int"])
    if attr.get("bool") is not None:
        return bool(attr["bool"])
    if attr.get("string") is not None:
        return str(attr["string"])
    if attr.get("version") is not None:
        return fn.semver_value(attr["version"])
    raise ValueError("unsupported attribute value")


def attribute_converts(attr: Any) -> bool:
    """Whether an attribute value becomes a CEL value (else the device's whole input fails)."""
    if attr.__class__ is dict and len(attr) == 1:
        ((field_name, raw),) = attr.items()
        if raw.__class__ is str and field_name == "string":
            return True
        if raw.__class__ is bool and field_name == "bool":
            return True
        if raw.__class__ is int and field_name == "int":
            return _INT64_MIN <= raw <= _INT64_MAX
    try:
        _attribute_value(attr)
    except (ValueError, TypeError):
        return False
    return True


def build_device(device: DeviceInput) -> DeviceData:
    """The ``device`` value of a DeviceInput, or why it cannot be built (naming the field)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in device.attributes.items():
        domain, ident = _split_name(name, device.driver)
        try:
            value = _attribute_value(attr)
        except (ValueError, TypeError) as exc:
            return DeviceData(None, f"attribute {name}: {exc}")
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, ident = _split_name(name, device.driver)
        raw = cap.get("value") if cap.__class__ is dict or isinstance(cap, Mapping) else None
        try:
            value = fn.quantity_value(raw)
        except fn.FunctionError as exc:
            return DeviceData(None, f"capacity {name}: {exc}")
        capacity.setdefault(domain, {})[ident] = value
    data: dict[str, Any] = {
        "driver": device.driver,
        # Upstream: ptr.Deref(AllowMultipleAllocations, false), whatever the features (a
        # selector that may not read it does not compile).
        "allowMultipleAllocations": device.allow_multiple_allocations is True,
        "attributes": attributes,
        "capacity": capacity,
    }
    return DeviceData({"device": data}, None)


def plain_domains(
    driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]
) -> tuple[str, ...] | None:
    """The attribute domains of a device whose CEL input cannot fail to build, else None.

    That is every attribute in the one-field shape, with a value of its exact type (its CEL
    value is the raw value) or a valid version, and every capacity a valid quantity. Such a
    device is answered by a projected selector from its raw attributes (`Projection.raw_key`)
    without building its CEL input; any other device takes the full path, which reports its
    conversion error as before.
    """
    domains: set[str] = set()
    for name, attribute in attributes.items():
        if attribute.__class__ is not dict or len(attribute) != 1:
            return None
        ((field_name, raw),) = attribute.items()
        if raw.__class__ is not _SCALAR_CONVERSIONS.get(field_name) or (
            raw.__class__ is int and not _INT64_MIN <= raw <= _INT64_MAX
        ):
            if field_name != "version":
                return None
            try:
                fn.semver_value(raw)  # cached per text; `Projection.raw_key` reads no version
            except fn.FunctionError:
                return None
        domain, sep, _ = name.partition("/")
        domains.add(domain if sep else driver)
    for entry in capacity.values():
        raw = entry.get("value") if entry.__class__ is dict else None
        try:
            fn.quantity_value(raw)  # cached per text
        except fn.FunctionError:
            return None
    # A tuple, not a frozenset: the collector stops tracking a tuple of strings, and one is
    # kept per device for the process's life (100,000 sets walked by every full collection).
    return tuple(domains)


_NOT_PLAIN: Final = ("\0",)
_plain_cache: weakref.WeakKeyDictionary[DeviceInput, tuple[str, ...]] = weakref.WeakKeyDictionary()


def device_domains(device: DeviceInput) -> tuple[str, ...] | None:
    """`plain_domains` of a DeviceInput, kept as long as the device lives."""
    domains = _plain_cache.get(device)
    if domains is None:
        domains = plain_domains(device.driver, device.attributes, device.capacity)
        domains = _plain_cache.setdefault(device, _NOT_PLAIN if domains is None else domains)
    return None if domains is _NOT_PLAIN else domains


def device_data(device: DeviceInput, options: Hashable) -> DeviceData:
    """The kept ``device`` value of a device for one environment (`CELOptions`)."""
    per_device = _device_cache.get(device)
    if per_device is None:
        # setdefault: threads racing on a new device agree on one dict.
        per_device = _device_cache.setdefault(device, {})
    data = per_device.get(options)
    if data is None:
        # The value is the same for all options; the activations built from it are not.
        data = per_device.setdefault(options, build_device(device))
    return data
