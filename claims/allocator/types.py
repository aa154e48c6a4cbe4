"""Value types shared by the allocator modules: features, device IDs, allocated state and errors.

The allocator reads Kubernetes objects as the JSON dicts the API server sends (resource.k8s.io/v1
shape). Slices are parsed once into `SliceInfo`/`DeviceInfo` so that per-node work only touches
prepared Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from claims.allocator.quantity import Quantity, QuantityError

# (driver, pool, device): devices are identified like upstream's DeviceID.
DeviceID = tuple[str, str, str]
# (driver, pool, device, shareID) for shares of a device that allows multiple allocations.
SharedDeviceID = tuple[str, str, str, str]
# Consumed amount per capacity name.
ConsumedCapacity = dict[str, Quantity]

JSON = dict[str, Any]

# Upstream's resourceapi.AllocationResultsMaxSize.
ALLOCATION_RESULTS_MAX_SIZE = 32


class AllocationError(Exception):
    """The allocator cannot proceed: invalid input, unknown class, a limit exceeded, bad CEL."""


class NodeAllocationError(AllocationError):
    """Allocation failed on this one node only (upstream's ErrFailedAllocationOnNode)."""


class ScenarioError(AllocationError):
    """A scenario or object is malformed; the message names the object and field."""


@dataclass(frozen=True)
class Features:
    """Optional allocator behaviour, one switch per upstream `Features` entry."""

    AdminAccess: bool = True
    ConsumableCapacity: bool = True
    DeviceBindingAndStatus: bool = True
    DeviceTaints: bool = True
    ListTypeAttributes: bool = True
    PartitionableDevices: bool = True
    PrioritizedList: bool = True

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> Features:
        """Build from a scenario's `features` map; a feature that is not mentioned is enabled."""
        values = values or {}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ScenarioError(f"features: unknown feature(s) {', '.join(unknown)}")
        kwargs: dict[str, bool] = {}
        for name, value in values.items():
            if not isinstance(value, bool):
                raise ScenarioError(f"features.{name}: must be true or false, got {value!r}")
            kwargs[name] = value
        return cls(**kwargs)


def parse_device_id(text: str) -> DeviceID:
    """Split `driver/pool/device`; pool names may contain slashes, drivers and devices do not."""
    driver, _, rest = text.partition("/")
    pool, _, device = rest.rpartition("/")
    if not driver or not pool or not device:
        raise ScenarioError(f"allocatedDevices: {text!r} is not of the form driver/pool/device")
    return driver, pool, device


def device_id_str(device_id: DeviceID) -> str:
    """Format a device ID the way upstream prints it in messages."""
    return "/".join(device_id)


def parse_quantity(value: Any, *, where: str) -> Quantity:
    """Parse a quantity string from an object, naming the field on failure."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ScenarioError(f"{where}: expected a quantity string, got {value!r}")
    try:
        return Quantity.parse(str(value))
    except QuantityError as exc:
        raise ScenarioError(f"{where}: invalid quantity {value!r}: {exc}") from exc


def add_capacity(target: ConsumedCapacity, added: Mapping[str, Quantity]) -> None:
    """Add every entry of `added` into `target`, creating missing entries (upstream Add)."""
    for name, quantity in added.items():
        current = target.get(name)
        target[name] = quantity if current is None else current.add(quantity)


def sub_capacity(target: ConsumedCapacity, subtracted: Mapping[str, Quantity]) -> None:
    """Subtract the entries of `subtracted` that exist in `target` (upstream Sub)."""
    for name, quantity in subtracted.items():
        current = target.get(name)
        if current is not None:
            target[name] = current.sub(quantity)


@dataclass
class AllocatedState:
    """Devices already in use before this allocation (upstream schedulerapi.AllocatedState)."""

    allocated_devices: set[DeviceID] = field(default_factory=set)
    allocated_shared_device_ids: set[SharedDeviceID] = field(default_factory=set)
    aggregated_capacity: dict[DeviceID, ConsumedCapacity] = field(default_factory=dict)

    def insert_capacity(self, device_id: DeviceID, consumed: Mapping[str, Quantity]) -> None:
        """Record capacity consumed by one share of a device."""
        existing = self.aggregated_capacity.get(device_id)
        if existing is None:
            self.aggregated_capacity[device_id] = dict(consumed)
        else:
            add_capacity(existing, consumed)

    def is_device_allocated(self, device_id: DeviceID) -> bool:
        """True if the device is dedicated, shared or has consumed capacity (IsDeviceAllocated)."""
        if device_id in self.allocated_devices or device_id in self.aggregated_capacity:
            return True
        return any(shared[:3] == device_id for shared in self.allocated_shared_device_ids)

    def add_allocated_claims(self, claims: Iterable[JSON], *, consumable_capacity: bool) -> None:
        """Count the results of allocated claims as the scheduler does.

        Results with adminAccess hold no device. With ConsumableCapacity, a result with a shareID is
        a share of its device and its consumedCapacity is aggregated; otherwise it is dedicated.
        """
        for index, claim in enumerate(claims):
            where = f"allocatedClaims[{index}]"
            if not isinstance(claim, dict):
                raise ScenarioError(f"{where}: expected a ResourceClaim object")
            allocation = (claim.get("status") or {}).get("allocation") or {}
            results = (allocation.get("devices") or {}).get("results") or []
            for result in results:
                if result.get("adminAccess") is True:
                    continue
                try:
                    device_id = (result["driver"], result["pool"], result["device"])
                except KeyError as exc:
                    raise ScenarioError(
                        f"{where}.status.allocation.devices.results: missing {exc.args[0]}"
                    ) from exc
                share_id = result.get("shareID")
                if consumable_capacity and share_id is not None:
                    self.allocated_shared_device_ids.add((*device_id, share_id))
                    consumed = result.get("consumedCapacity")
                    if consumed is not None:
                        self.insert_capacity(
                            device_id,
                            {
                                name: parse_quantity(
                                    value, where=f"{where} consumedCapacity.{name}"
                                )
                                for name, value in consumed.items()
                            },
                        )
                    continue
                self.allocated_devices.add(device_id)

    @classmethod
    def from_scenario(cls, scenario: Mapping[str, Any], *, features: Features) -> AllocatedState:
        """Build from a scenario's allocatedDevices, allocatedSharedDevices, allocatedCapacity and
        allocatedClaims."""
        state = cls()
        for text in scenario.get("allocatedDevices") or []:
            if not isinstance(text, str):
                raise ScenarioError(f"allocatedDevices: expected strings, got {text!r}")
            state.allocated_devices.add(parse_device_id(text))
        for index, entry in enumerate(scenario.get("allocatedSharedDevices") or []):
            try:
                state.allocated_shared_device_ids.add(
                    (entry["driver"], entry["pool"], entry["device"], entry.get("shareID") or "")
                )
            except (KeyError, TypeError) as exc:
                raise ScenarioError(
                    f"allocatedSharedDevices[{index}]: needs driver, pool and device"
                ) from exc
        for index, entry in enumerate(scenario.get("allocatedCapacity") or []):
            try:
                device_id = (entry["driver"], entry["pool"], entry["device"])
            except (KeyError, TypeError) as exc:
                raise ScenarioError(
                    f"allocatedCapacity[{index}]: needs driver, pool and device"
                ) from exc
            consumed = {
                name: parse_quantity(value, where=f"allocatedCapacity[{index}].{name}")
                for name, value in (entry.get("consumedCapacity") or {}).items()
            }
            state.insert_capacity(device_id, consumed)
        state.add_allocated_claims(
            scenario.get("allocatedClaims") or [],
            consumable_capacity=features.ConsumableCapacity,
        )
        return state
