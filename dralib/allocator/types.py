"""Value types shared by the allocator modules: features, device IDs, allocated state and errors.

The allocator reads Kubernetes objects as the JSON dicts the API server sends (resource.k8s.io/v1
shape). Slices are parsed once into `SliceInfo`/`DeviceInfo` so that per-node work only touches
prepared Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from dralib.allocator.quantity import Quantity, QuantityError

# (driver, pool, device): devices are identified like upstream's DeviceID.
DeviceID = tuple[str, str, str]
# (driver, pool, device, shareID) for shares of a device that allows multiple allocations.
SharedDeviceID = tuple[str, str, str, str]
# Consumed amount per capacity name.
ConsumedCapacity = dict[str, Quantity]

JSON = dict[str, Any]


class AllocationError(Exception):
    """The allocator cannot proceed: invalid input, unknown class, a limit exceeded, bad CEL."""


class NodeAllocationError(AllocationError):
    """Allocation failed on this one node only (upstream's ErrFailedAllocationOnNode)."""


class ScenarioError(AllocationError):
    """A scenario or object is malformed; the message names the object and field."""


class AllocationTimeout(AllocationError):
    """The search gave up: its deadline passed or its caller cancelled it.

    Carries how long it ran (`elapsed`, seconds), how much it searched (`steps`, upstream's
    allocateOne invocations) and how far it got (`claim_index` of `claims_total`, where the
    search stood when it stopped), so a caller can answer "gave up after N s".
    """

    def __init__(
        self, *, elapsed: float, steps: int, claim_index: int, claims_total: int, cancelled: bool
    ) -> None:
        self.elapsed = elapsed
        self.steps = steps
        self.claim_index = claim_index
        self.claims_total = claims_total
        self.cancelled = cancelled
        why = "cancelled" if cancelled else "time budget exhausted"
        at = min(claim_index + 1, claims_total)
        super().__init__(
            f"allocation gave up after {elapsed:.1f} s ({why}): {steps} search steps, "
            f"at claim {at} of {claims_total}"
        )


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


def quantity_field(value: Any, *, where: str) -> Quantity:
    """The quantity in a field of an object (`where` names it in the error)."""
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


def _result_device(result: Any, *, where: str) -> DeviceID | None:
    """The device one `status.allocation.devices.results` entry holds; None for admin access,
    which holds none."""
    if not isinstance(result, dict):
        raise ScenarioError(f"{where}: expected a device result object")
    if result.get("adminAccess") is True:
        return None
    try:
        return (result["driver"], result["pool"], result["device"])
    except KeyError as exc:
        raise ScenarioError(f"{where}: missing {exc.args[0]}") from exc


def _consumed_capacity(result: JSON, *, where: str) -> ConsumedCapacity | None:
    """A result's parsed `consumedCapacity`, if it has one."""
    consumed = result.get("consumedCapacity")
    if consumed is None:
        return None
    return {
        name: quantity_field(value, where=f"{where} consumedCapacity.{name}")
        for name, value in consumed.items()
    }


@dataclass
class AllocatedState:
    """Devices already in use before this allocation (upstream schedulerapi.AllocatedState).

    Shares are also indexed by device so that `is_device_allocated` is a few lookups. Add shares
    with `add_shared_device` (or the other methods) rather than to the set directly: the index is
    rebuilt when the set's size no longer matches it, which catches direct additions but not a
    removal paired with an addition.
    """

    allocated_devices: set[DeviceID] = field(default_factory=set)
    allocated_shared_device_ids: set[SharedDeviceID] = field(default_factory=set)
    aggregated_capacity: dict[DeviceID, ConsumedCapacity] = field(default_factory=dict)
    _shares_per_device: dict[DeviceID, int] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _indexed_shares: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._reindex_shares()

    def _reindex_shares(self) -> None:
        counts: dict[DeviceID, int] = {}
        for shared in self.allocated_shared_device_ids:
            base = shared[:3]
            counts[base] = counts.get(base, 0) + 1
        self._shares_per_device = counts
        self._indexed_shares = len(self.allocated_shared_device_ids)

    def add_shared_device(self, device_id: DeviceID, share_id: str) -> None:
        """Record one share of a device that allows multiple allocations."""
        if len(self.allocated_shared_device_ids) != self._indexed_shares:
            self._reindex_shares()
        shared = (*device_id, share_id)
        if shared in self.allocated_shared_device_ids:
            return
        self.allocated_shared_device_ids.add(shared)
        self._shares_per_device[device_id] = self._shares_per_device.get(device_id, 0) + 1
        self._indexed_shares += 1

    def remove_shared_device(self, device_id: DeviceID, share_id: str) -> bool:
        """Forget one share of a device; False if it was not recorded."""
        if len(self.allocated_shared_device_ids) != self._indexed_shares:
            self._reindex_shares()
        shared = (*device_id, share_id)
        if shared not in self.allocated_shared_device_ids:
            return False
        self.allocated_shared_device_ids.discard(shared)
        remaining = self._shares_per_device.get(device_id, 1) - 1
        if remaining > 0:
            self._shares_per_device[device_id] = remaining
        else:
            self._shares_per_device.pop(device_id, None)
        self._indexed_shares -= 1
        return True

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
        if len(self.allocated_shared_device_ids) != self._indexed_shares:
            self._reindex_shares()
        return device_id in self._shares_per_device

    def holding(self, device_id: DeviceID) -> tuple[bool, bool, tuple[str, ...]] | None:
        """What is held of a device: (dedicated, shared, consumed capacity), None when nothing.

        Everything of the state a search reads about the device, as a comparable value.
        """
        consumed = self.aggregated_capacity.get(device_id)
        if len(self.allocated_shared_device_ids) != self._indexed_shares:
            self._reindex_shares()
        dedicated = device_id in self.allocated_devices
        shared = device_id in self._shares_per_device
        if consumed is None and not dedicated and not shared:
            return None
        amounts = tuple(f"{name}={value}" for name, value in sorted((consumed or {}).items()))
        return dedicated, shared, amounts

    def copy(self) -> AllocatedState:
        """An independent copy: changes to either do not show in the other."""
        return AllocatedState(
            allocated_devices=set(self.allocated_devices),
            allocated_shared_device_ids=set(self.allocated_shared_device_ids),
            aggregated_capacity={k: dict(v) for k, v in self.aggregated_capacity.items()},
        )

    def add_results(
        self, results: Iterable[Any], *, consumable_capacity: bool, where: str
    ) -> list[DeviceID]:
        """Count the entries of one `status.allocation.devices.results` list as allocated.

        Results with adminAccess hold no device. With ConsumableCapacity, a result with a shareID
        is a share of its device and its consumedCapacity is aggregated; otherwise it is
        dedicated. Returns the devices that were not allocated before.
        """
        added: list[DeviceID] = []
        for result in results:
            device_id = _result_device(result, where=where)
            if device_id is None:
                continue
            if not self.is_device_allocated(device_id):
                added.append(device_id)
            share_id = result.get("shareID")
            if consumable_capacity and share_id is not None:
                self.add_shared_device(device_id, share_id)
                consumed = _consumed_capacity(result, where=where)
                if consumed is not None:
                    self.insert_capacity(device_id, consumed)
                continue
            self.allocated_devices.add(device_id)
        return added

    def remove_results(
        self, results: Iterable[Any], *, consumable_capacity: bool, where: str
    ) -> list[DeviceID]:
        """Stop counting the entries of one results list (the inverse of `add_results`).

        A dedicated device is freed; a share is dropped with the capacity it consumed, and a
        device's aggregated capacity goes with its last share. Returns the devices that are no
        longer allocated at all.
        """
        freed: list[DeviceID] = []
        for result in results:
            device_id = _result_device(result, where=where)
            if device_id is None:
                continue
            share_id = result.get("shareID")
            if consumable_capacity and share_id is not None:
                # A share released twice must not give its capacity back twice.
                removed = self.remove_shared_device(device_id, share_id)
                existing = self.aggregated_capacity.get(device_id)
                consumed = _consumed_capacity(result, where=where)
                if removed and existing is not None and consumed is not None:
                    sub_capacity(existing, consumed)
                if device_id not in self._shares_per_device:
                    self.aggregated_capacity.pop(device_id, None)
            else:
                self.allocated_devices.discard(device_id)
            if not self.is_device_allocated(device_id):
                freed.append(device_id)
        return freed

    def add_allocated_claims(self, claims: Iterable[JSON], *, consumable_capacity: bool) -> None:
        """Count the results of allocated claims as the scheduler does (see `add_results`)."""
        for index, claim in enumerate(claims):
            where = f"allocatedClaims[{index}]"
            if not isinstance(claim, dict):
                raise ScenarioError(f"{where}: expected a ResourceClaim object")
            allocation = (claim.get("status") or {}).get("allocation") or {}
            results = (allocation.get("devices") or {}).get("results") or []
            self.add_results(
                results,
                consumable_capacity=consumable_capacity,
                where=f"{where}.status.allocation.devices.results",
            )

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
                state.add_shared_device(
                    (entry["driver"], entry["pool"], entry["device"]), entry.get("shareID") or ""
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
                name: quantity_field(value, where=f"allocatedCapacity[{index}].{name}")
                for name, value in (entry.get("consumedCapacity") or {}).items()
            }
            state.insert_capacity(device_id, consumed)
        state.add_allocated_claims(
            scenario.get("allocatedClaims") or [],
            consumable_capacity=features.ConsumableCapacity,
        )
        return state
