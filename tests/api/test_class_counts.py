"""Exact devices per DeviceClass (claims.devices.classes): CEL membership, holds, errors, cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from claims.devices.classes import class_membership, class_utilisation, forget_membership
from tests import factories as f
from tests.console.demo import load_demo

GPU = "gpu.example.com"
NET = "net.example.com"


@pytest.fixture(autouse=True)
def fresh_membership() -> Iterator[None]:
    """Each test starts without a membership cached by another test's database."""
    forget_membership()
    yield
    forget_membership()


def _class(name: str, *expressions: str) -> dict[str, Any]:
    device_class = f.device_class_object(name)
    device_class["spec"]["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return device_class


def _gpu(name: str, **attributes: Any) -> dict[str, Any]:
    typed = {key: {"string": value} for key, value in attributes.items()}
    return f.device_entry(name, attributes=typed, capacity={"memory": "80Gi"})


@pytest.fixture
def fleet(db) -> None:
    """Node-a: h100 gpu-0 (held), gpu-1 (held with admin access only), a100 gpu-2, and gpu-3
    without a model; node-a-net: one shared NIC held by a claim."""
    f.create(
        f.node_object("node-a"),
        f.slice_object(
            "node-a-gpu",
            driver=GPU,
            pool="node-a",
            node="node-a",
            devices=[
                _gpu("gpu-0", model="h100", tier="a"),
                _gpu("gpu-1", model="h100", tier="b"),
                _gpu("gpu-2", model="a100", tier="a"),
                _gpu("gpu-3", tier="a"),
            ],
        ),
        f.slice_object(
            "node-a-net",
            driver=NET,
            pool="node-a-net",
            node="node-a",
            devices=[f.device_entry("nic-0", allow_multiple=True)],
        ),
        _class("h100", f'device.attributes["{GPU}"].model == "h100"'),
        _class(
            "h100-tier-a",
            f'device.driver == "{GPU}"',
            f'device.attributes["{GPU}"].model == "h100"',
            f'device.attributes["{GPU}"].tier == "a"',
        ),
        _class("nic", f'device.driver == "{NET}"'),
        f.claim_object(
            "train",
            results=[f.allocation_result("gpu", driver=GPU, pool="node-a", device="gpu-0")],
        ),
        f.claim_object(
            "monitor",
            results=[
                f.allocation_result(
                    "gpu", driver=GPU, pool="node-a", device="gpu-1", admin_access=True
                )
            ],
        ),
        f.claim_object(
            "net",
            device_class="nic",
            results=[f.allocation_result("nic", driver=NET, pool="node-a-net", device="nic-0")],
        ),
    )


def _by_name() -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in class_utilisation()["classes"]}


def test_model_selector_counts_exactly_the_matching_devices(fleet) -> None:
    """A class selecting model h100 has gpu-0 and gpu-1 as members, nothing else."""
    members = class_membership().members["h100"]
    keys = {key for key, pk in class_membership().keys.items() if pk in members}
    assert keys == {(GPU, "node-a", "gpu-0"), (GPU, "node-a", "gpu-1")}
    entry = _by_name()["h100"]
    assert entry["method"] == "cel"
    assert entry["devices"]["total"] == 2


def test_allocated_and_free_split(fleet) -> None:
    """gpu-0 is held (allocated), gpu-1 only by admin access (free, admin); the NIC is shared."""
    by_name = _by_name()
    assert by_name["h100"]["devices"] == {
        "total": 2,
        "allocated": 1,
        "shared": 0,
        "admin": 1,
        "tainted": 0,
        "free": 1,
    }
    nic = by_name["nic"]["devices"]
    assert (nic["total"], nic["allocated"], nic["shared"], nic["free"]) == (1, 1, 1, 0)


def test_selectors_are_anded(fleet) -> None:
    """driver, model h100 and tier a together leave only gpu-0."""
    members = class_membership().members["h100-tier-a"]
    assert {class_membership().keys[(GPU, "node-a", "gpu-0")]} == members
    assert _by_name()["h100-tier-a"]["devices"]["total"] == 1


def test_runtime_error_counts_as_no_match_and_is_reported(fleet) -> None:
    """gpu-3 has no model attribute and the NIC has no GPU domain: both raise for `h100`."""
    entry = _by_name()["h100"]
    assert entry["cel_errors"] == 2
    assert "CEL runtime error" in entry["error"]
    # Behind the driver selector the same lookup never runs on the NIC: only gpu-3 raises.
    assert _by_name()["h100-tier-a"]["cel_errors"] == 1


def test_class_that_does_not_compile_is_not_counted(fleet) -> None:
    """A selector that does not compile leaves the class without counts, naming the field."""
    f.create(_class("broken", "device.driver =="))
    entry = _by_name()["broken"]
    assert entry["devices"] is None
    assert "spec.selectors[0].cel.expression" in entry["error"]


def test_membership_is_cached_until_a_slice_changes(fleet) -> None:
    """The same membership is reused while nothing changes and recomputed after a new slice."""
    first = class_membership()
    assert class_membership() is first
    f.create(
        f.slice_object(
            "node-b-gpu", driver=GPU, pool="node-b", devices=[_gpu("gpu-0", model="h100")]
        )
    )
    second = class_membership()
    assert second is not first
    assert len(second.members["h100"]) == len(first.members["h100"]) + 1


def test_allocations_are_counted_without_recomputing_membership(fleet) -> None:
    """A new allocation changes the counts while the cached membership stays."""
    first = class_membership()
    before = _by_name()["h100"]["devices"]["allocated"]
    f.create(
        f.claim_object(
            "more",
            results=[f.allocation_result("gpu", driver=GPU, pool="node-a", device="gpu-1")],
        )
    )
    assert _by_name()["h100"]["devices"]["allocated"] == before + 1
    assert class_membership() is first


def _demo_h100(objects: dict[str, list[dict[str, Any]]]) -> int:
    """h100 GPUs in the generated slices, read from the objects themselves (no CEL)."""
    count = 0
    for slice_ in objects["ResourceSlice"]:
        spec = slice_["spec"]
        if spec.get("driver") != GPU:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            kind = (attributes.get("type") or {}).get("string")
            model = (attributes.get("model") or {}).get("string")
            count += kind == "gpu" and model == "h100"
    return count


def test_overview_shows_numbers_for_gpu_h100_on_the_demo(db, viewer_user) -> None:
    """On the demo cluster the overview shows gpu-h100's device count, as its slices list."""
    objects = load_demo(nodes=10, seed=1)
    expected = _demo_h100(objects)
    assert expected > 0
    client = Client()
    client.force_login(viewer_user)
    response = client.get(reverse("overview"))
    entry = next(c for c in response.context["classes"]["classes"] if c["name"] == "gpu-h100")
    assert entry["devices"]["total"] == expected
    assert entry["cel_errors"] == 0
    shown = f"{entry['devices']['allocated']} / {expected}"
    assert shown in response.content.decode()
