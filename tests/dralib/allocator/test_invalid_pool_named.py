"""An invalid pool is named, with its reason, in the error upstream words generically."""

from __future__ import annotations

import json

from dralib.allocator import allocate_scenario
from tests.paths import CONFORMANCE


def test_the_error_names_the_invalid_pool_and_why() -> None:
    """The upstream case's error still starts with upstream's words, then names pool and reason."""
    case = json.loads(
        (CONFORMANCE / "invalid-pool-is-error-if-no-other-device-can-be-allocated.json").read_text()
    )
    assert case["expect"]["error"]  # upstream fails here too
    output = allocate_scenario(case["scenario"])
    assert output["error"].startswith("invalid resource pools were encountered (")
    pools = {(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in case["scenario"]["slices"]}
    assert any(f"{driver}/{pool}: " in output["error"] for driver, pool in pools)
