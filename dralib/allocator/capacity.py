"""Consumable capacity (upstream consumable_capacity.go).

A device that allows multiple allocations can be shared; each share consumes some of the device's
capacity. What a share consumes follows the capacity's request policy: a default when nothing is
requested, rounded up to the valid range's step or to the next valid value otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from dralib.allocator.quantity import BINARY_SI, Quantity
from dralib.allocator.slices import CapacityInfo
from dralib.allocator.types import ConsumedCapacity


class UndefinedCapacityError(Exception):
    """The request asks for a capacity the device does not define."""


def _go_div_mod(a: int, b: int) -> tuple[int, int]:
    # Go's integer division truncates toward zero; Python's floors.
    quotient = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        quotient = -quotient
    return quotient, a - b * quotient


def _round_up_range(requested: Quantity, cap: CapacityInfo) -> Quantity:
    assert cap.range_min is not None
    if requested < cap.range_min:
        return cap.range_min
    if cap.range_step is None:
        return requested
    minimum = cap.range_min.value_int()
    step = cap.range_step.value_int()
    n, mod = _go_div_mod(requested.value_int() - minimum, step)
    if mod != 0:
        n += 1
    return Quantity.from_int(minimum + step * n, BINARY_SI)


def _round_up_valid_values(requested: Quantity, valid_values: list[Quantity]) -> Quantity:
    for value in valid_values:
        if requested <= value:
            return value
    return requested


def calculate_consumed(requested: Quantity | None, cap: CapacityInfo) -> Quantity:
    """What one share consumes of this capacity, given what was requested (if anything)."""
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if not cap.has_policy:
        return requested
    if cap.valid_range and cap.range_min is not None:
        return _round_up_range(requested, cap)
    if cap.valid_values is not None:
        return _round_up_valid_values(requested, cap.valid_values)
    return requested


def violates_policy(value: Quantity, cap: CapacityInfo) -> bool:
    """True if the consumed value is not allowed by the capacity's request policy.

    Upstream compares with the default by struct equality; a valid default satisfies the policy
    anyway, so comparing values gives the same answer.
    """
    if not cap.has_policy:
        return False
    if cap.default is not None and value == cap.default:
        return False
    if cap.valid_range:
        if cap.range_max is not None and value > cap.range_max:
            return True
        if cap.range_step is not None and cap.range_min is not None:
            _, mod = _go_div_mod(
                value.value_int() - cap.range_min.value_int(), cap.range_step.value_int()
            )
            if mod != 0:
                return True
        return False
    if cap.valid_values:
        return not any(value == valid for valid in cap.valid_values)
    return False


def fits(
    *,
    consumed: Mapping[str, Quantity] | None,
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, CapacityInfo],
    allocating: Mapping[str, Quantity] | None,
) -> bool:
    """Upstream CmpRequestOverCapacity: can one more share with these requests be added?

    `consumed` is what allocated claims hold, `allocating` what the current attempt holds.
    Raises UndefinedCapacityError if a requested capacity does not exist on the device.
    """
    if requests:
        for name in requests:
            if name not in capacity:
                raise UndefinedCapacityError(name)
    for name, cap in capacity.items():
        requested = requests.get(name) if requests else None
        value = calculate_consumed(requested, cap)
        if violates_policy(value, cap):
            return False
        total = value
        if consumed is not None and name in consumed:
            total = consumed[name].add(total)
        if allocating is not None and name in allocating:
            total = total.add(allocating[name])
        if total > cap.value:
            return False
    return True


def consumed_by_request(
    requests: Mapping[str, Quantity] | None, capacity: Mapping[str, CapacityInfo]
) -> ConsumedCapacity:
    """Upstream GetConsumedCapacityFromRequest: what one share consumes of every capacity."""
    return {
        name: calculate_consumed(requests.get(name) if requests else None, cap)
        for name, cap in capacity.items()
    }


def is_empty(consumed: Mapping[str, Quantity]) -> bool:
    """True if every amount is zero (upstream ConsumedCapacity.Empty)."""
    return all(q.is_zero() for q in consumed.values())
