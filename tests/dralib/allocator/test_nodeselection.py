"""Node selectors follow apimachinery's label requirement rules (keys, values, Gt/Lt integers)."""

from __future__ import annotations

import pytest

from dralib.allocator.nodeselection import NodeInfo, NodeSelector, node_matches
from dralib.allocator.types import AllocationError


def _selector(key: str, operator: str, values: list[str]) -> NodeSelector:
    requirement = {"key": key, "operator": operator, "values": values}
    return NodeSelector({"nodeSelectorTerms": [{"matchExpressions": [requirement]}]})


def _matches(labels: dict[str, str], selector: NodeSelector) -> bool:
    node = NodeInfo(name="node-1", labels=labels)
    return node_matches(node, node_name="", all_nodes=False, selector=selector)


@pytest.mark.parametrize(
    ("label", "matches"),
    [("7", True), ("+7", True), ("1_0", False), (" 7", False), ("٧", False), ("3", False)],
)
def test_gt_compares_go_decimal_integers(label: str, matches: bool) -> None:
    """Gt reads the label as Go's ParseInt does: sign and ASCII digits, nothing else."""
    assert _matches({"cores": label}, _selector("cores", "Gt", ["5"])) is matches


@pytest.mark.parametrize(
    ("key", "operator", "values"),
    [
        ("cores", "Gt", ["9223372036854775808"]),
        ("a/b/c", "Exists", []),
        ("Example.com/zone", "Exists", []),
        ("zone", "In", ["a b"]),
        ("zone", "In", ["x" * 64]),
    ],
)
def test_invalid_requirement_is_a_parse_error(key: str, operator: str, values: list[str]) -> None:
    """Keys, values and Gt/Lt integers that labels.NewRequirement rejects fail the selector."""
    with pytest.raises(AllocationError, match="failed to parse node selector"):
        _matches({"zone": "a", "cores": "8"}, _selector(key, operator, values))


def test_prefixed_key_and_empty_value_are_valid() -> None:
    """A DNS-subdomain prefix and an empty value are allowed, as in Kubernetes labels."""
    assert _matches({"example.com/zone": ""}, _selector("example.com/zone", "In", [""]))
