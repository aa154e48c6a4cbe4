"""The normalizer applies the API server's request defaults (allocationMode, count)."""

from __future__ import annotations

from typing import Any

from dralib.kube.normalize import normalize


def _claim(requests: list[dict[str, Any]], *, api_version: str = "resource.k8s.io/v1") -> dict:
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {"devices": {"requests": requests}},
    }


def test_exactly_request_gets_exact_count_of_one() -> None:
    """An exactly request without mode or count becomes ExactCount with count 1."""
    result = normalize(_claim([{"name": "r", "exactly": {"deviceClassName": "gpu"}}]))
    exactly = result["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["allocationMode"] == "ExactCount"
    assert exactly["count"] == 1


def test_subrequests_get_defaults() -> None:
    """Each firstAvailable subrequest is defaulted on its own."""
    subs = [
        {"name": "a", "deviceClassName": "gpu"},
        {"name": "b", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 3},
    ]
    result = normalize(_claim([{"name": "r", "firstAvailable": subs}]))
    got = result["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(s["allocationMode"], s["count"]) for s in got] == [
        ("ExactCount", 1),
        ("ExactCount", 3),
    ]


def test_all_mode_gets_no_count() -> None:
    """allocationMode All keeps no count, as upstream's defaulter leaves it."""
    exactly = {"deviceClassName": "gpu", "allocationMode": "All"}
    result = normalize(_claim([{"name": "r", "exactly": exactly}]))
    assert "count" not in result["spec"]["devices"]["requests"][0]["exactly"]


def test_zero_count_becomes_one() -> None:
    """Count 0 is Go's unset value, which the API server defaults to 1."""
    exactly = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 0}
    result = normalize(_claim([{"name": "r", "exactly": exactly}]))
    assert result["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1


def test_v1beta1_inline_request_is_defaulted_under_exactly() -> None:
    """An older inline request is moved under exactly and defaulted there."""
    result = normalize(
        _claim([{"name": "r", "deviceClassName": "gpu"}], api_version="resource.k8s.io/v1beta1")
    )
    exactly = result["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 1)


def test_template_requests_are_defaulted() -> None:
    """A ResourceClaimTemplate's claim spec gets the same defaults."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}
            }
        },
    }
    exactly = normalize(template)["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 1)
