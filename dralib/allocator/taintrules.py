"""DeviceTaintRules applied to ResourceSlices, as the scheduler sees devices before allocating.

A rule taints the devices its `deviceSelector` names (driver, pool, device; empty matches any).
The allocator reads taints from the devices themselves, so callers patch copies of the slices a
rule selects and pass those; `PatchedSlices` keeps the copies while slices and rules stay the
same, so an unchanged cluster hands the allocator the same objects (and its slice cache hits).
"""

from __future__ import annotations

from collections.abc import Sequence

from dralib.allocator.types import JSON

# (driver, pool, device, taint): the selector's fields ("" matches any) and the taint it adds.
TaintRule = tuple[str, str, str, JSON]


def taint_rule(rule: JSON) -> TaintRule | None:
    """The selector and taint of a DeviceTaintRule object, or None when it sets no taint."""
    spec = rule.get("spec") or {}
    taint = spec.get("taint")
    if not isinstance(taint, dict) or not taint:
        return None
    selector = spec.get("deviceSelector") or {}
    return (
        str(selector.get("driver") or ""),
        str(selector.get("pool") or ""),
        str(selector.get("device") or ""),
        taint,
    )


def apply_taint_rules(slice_obj: JSON, rules: Sequence[TaintRule]) -> JSON:
    """The slice with each rule's taint added to the devices the rule selects.

    The slice itself is returned when no rule selects its pool.
    """
    spec = slice_obj.get("spec") or {}
    driver = spec.get("driver")
    pool = (spec.get("pool") or {}).get("name")
    matching = [rule for rule in rules if rule[0] in ("", driver) and rule[1] in ("", pool)]
    if not matching or not spec.get("devices"):
        return slice_obj
    # New containers only on the path to the taints: the rest stays the slice's own objects,
    # shared with the unpatched slice (a deep copy held every device's attributes twice).
    devices = []
    for device in spec.get("devices") or []:
        added = [
            dict(taint)
            for _, _, device_name, taint in matching
            if device_name in ("", device.get("name"))
        ]
        if added:
            device = {**device, "taints": [*(device.get("taints") or []), *added]}
        devices.append(device)
    return {**slice_obj, "spec": {**spec, "devices": devices}}


class PatchedSlices:
    """Slices with the taint rules applied, reused while both the slice and the rules are."""

    def __init__(self) -> None:
        self.rules_key = ""
        self.by_id: dict[int, tuple[JSON, JSON]] = {}
        # The last list of slices given and the list returned for it: a read after a change
        # to anything but slices and rules gives the very same list, and gets the same answer
        # without a walk over every slice.
        self.last: tuple[Sequence[JSON], list[JSON]] | None = None

    def apply(self, slices: Sequence[JSON], rules: Sequence[TaintRule]) -> list[JSON]:
        rules_key = repr(rules)
        last = self.last
        if last is not None and last[0] is slices and rules_key == self.rules_key:
            return last[1]
        if rules_key != self.rules_key:
            self.rules_key = rules_key
            self.by_id = {}
        previous = self.by_id
        current: dict[int, tuple[JSON, JSON]] = {}
        out = []
        for obj in slices:
            entry = previous.get(id(obj))
            if entry is None or entry[0] is not obj:
                entry = (obj, apply_taint_rules(obj, rules) if rules else obj)
            current[id(obj)] = entry
            out.append(entry[1])
        self.by_id = current
        self.last = (slices, out)
        return out
