"""DeviceTaintRules patched into slices: which devices get the taint, and copies reused."""

from __future__ import annotations

from dralib.allocator.taintrules import PatchedSlices, apply_taint_rules, taint_rule

TAINT = {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"}


def resource_slice(pool: str, *devices: str) -> dict:
    return {
        "metadata": {"name": f"{pool}-slice"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "nodeName": pool,
            "devices": [{"name": name} for name in devices],
        },
    }


def rule(**selector: str) -> dict:
    return {
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"deviceSelector": selector, "taint": TAINT},
    }


def test_rule_taints_only_the_selected_device_of_a_copy() -> None:
    """A rule naming one device taints that device in a copy; the original is left alone."""
    original = resource_slice("node-a", "gpu-0", "gpu-1")
    patched = apply_taint_rules(original, [taint_rule(rule(pool="node-a", device="gpu-1"))])
    assert patched is not original
    assert [d.get("taints") for d in patched["spec"]["devices"]] == [None, [TAINT]]
    assert all("taints" not in d for d in original["spec"]["devices"])


def test_the_copy_shares_every_part_it_does_not_taint() -> None:
    """Only the containers on the way to the new taint are new: other devices, attributes and
    earlier taints' objects are the original's (a deep copy held them twice)."""
    original = resource_slice("node-a", "gpu-0", "gpu-1")
    held = {"key": "example.com/old", "effect": "NoSchedule"}
    for device in original["spec"]["devices"]:
        device["attributes"] = {"model": {"string": "a100"}}
    original["spec"]["devices"][1]["taints"] = [held]
    patched = apply_taint_rules(original, [taint_rule(rule(pool="node-a", device="gpu-1"))])
    untouched, tainted = patched["spec"]["devices"]
    assert untouched is original["spec"]["devices"][0]
    assert tainted["attributes"] is original["spec"]["devices"][1]["attributes"]
    assert tainted["taints"] == [held, TAINT] and tainted["taints"][0] is held
    assert original["spec"]["devices"][1]["taints"] == [held]
    assert patched["spec"]["pool"] is original["spec"]["pool"]


def test_rule_for_another_pool_returns_the_slice_itself() -> None:
    """A slice no rule selects is handed back as is, so parsed-slice caches keep hitting."""
    original = resource_slice("node-a", "gpu-0")
    assert apply_taint_rules(original, [taint_rule(rule(pool="node-b"))]) is original


def test_empty_selector_fields_match_any_and_rules_without_taint_are_dropped() -> None:
    """An empty selector taints every device; a rule without a taint is no rule."""
    original = resource_slice("node-a", "gpu-0", "gpu-1")
    patched = apply_taint_rules(original, [taint_rule(rule(driver="gpu.example.com"))])
    assert [d["taints"] for d in patched["spec"]["devices"]] == [[TAINT], [TAINT]]
    assert taint_rule({"spec": {"deviceSelector": {"pool": "x"}}}) is None


def test_patched_slices_reuses_copies_until_slice_or_rules_change() -> None:
    """The same slice object and rules give the same patched object; new rules patch anew."""
    patched = PatchedSlices()
    first = resource_slice("node-a", "gpu-0")
    rules = [taint_rule(rule(pool="node-a"))]
    once = patched.apply([first], rules)[0]
    assert patched.apply([first], rules)[0] is once
    other = patched.apply([first], [taint_rule(rule(pool="node-a", device="gpu-9"))])[0]
    assert other is not once and "taints" not in other["spec"]["devices"][0]
