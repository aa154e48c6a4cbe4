"""Counter sets as physical units: which sets a pool's devices draw on together, whether a
device is the whole of its sets or a partition, and a partition's profile (see
`claims.devices.availability` for the definitions these serve).

Devices repeat a few `consumesCounters` spellings (one per partition shape and counter set),
so the parses of a spelling are cached.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from claims.devices.states import _attribute_value, _consumption

__all__ = ["PROFILE_ATTRIBUTE", "Counters", "consumed_sets", "counter_set_units"]

PROFILE_ATTRIBUTE = "profile"
Counters = dict[tuple[str, str], Fraction]


class _Sets:
    """Union-find over one pool's counter set names: a device drawing on two joins them."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def join(self, names: Sequence[str]) -> None:
        roots = sorted({self.find(name) for name in names})
        for root in roots[1:]:
            self.parent[root] = roots[0]


def consumed_sets(consumes: Any) -> list[str]:
    """The counter set names a device's `consumesCounters` list draws on, sorted."""
    entries = consumes if isinstance(consumes, list) else []
    return sorted(
        {str(entry.get("counterSet", "")) for entry in entries if isinstance(entry, Mapping)}
    )


def counter_set_units(consumed: Iterable[Sequence[str]]) -> dict[str, str]:
    """Within one pool: counter set name -> the name of the physical unit it is part of, for
    the sets its devices draw on (`consumed_sets` of each). Sets that one device draws on
    together are one unit, named by their names joined with `+`."""
    sets = _Sets()
    for names in consumed:
        if names:
            sets.join(names)
    members: dict[str, list[str]] = defaultdict(list)
    for name in list(sets.parent):
        members[sets.find(name)].append(name)
    return {name: "+".join(sorted(group)) for group in members.values() for name in group}


@lru_cache(maxsize=4096)
def _set_names(spelling: str) -> tuple[str, ...]:
    # Devices repeat a few spellings (one per partition shape and counter set): parsed once.
    return tuple(consumed_sets(json.loads(spelling) if spelling else []))


@lru_cache(maxsize=4096)
def _shape(spelling: str) -> str:
    """What a consumer takes, without the counter set's name: `memory=10Gi multiprocessors=16`
    (sets joined by ` + `), so that like slices of different GPUs are one profile."""
    entries = json.loads(spelling) if spelling else []
    parts = []
    for entry in sorted(
        (e for e in (entries if isinstance(entries, list) else []) if isinstance(e, Mapping)),
        key=lambda e: str(e.get("counterSet", "")),
    ):
        counters = entry.get("counters")
        amounts = sorted(counters.items()) if isinstance(counters, Mapping) else []
        parts.append(
            " ".join(
                f"{name}={amount.get('value', '') if isinstance(amount, Mapping) else ''}"
                for name, amount in amounts
            )
        )
    return " + ".join(parts) or "no counters"


def _whole(spelling: str, counters: Counters) -> bool:
    """True when the device takes every counter of each set it names, in full: the whole
    device of a partitionable GPU rather than a partition of it."""
    need = _consumption(spelling)
    sets = set(_set_names(spelling))
    declared = {key: value for key, value in counters.items() if key[0] in sets}
    if not sets or not declared or any(key not in counters for key in need):
        return False
    return all(need.get(key) == value for key, value in declared.items())


def _profile(attributes: Any, *, driver: str, spelling: str, type_attribute: Any) -> str:
    attributes = attributes if isinstance(attributes, Mapping) else {}
    names = [str(type_attribute)] if isinstance(type_attribute, str) and type_attribute else []
    names.append(f"{driver}/{PROFILE_ATTRIBUTE}")
    for name in names:
        value = _attribute_value(attributes, name, driver)
        if value:
            return value
    return _shape(spelling)
