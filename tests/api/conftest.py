"""A small hand-built cluster whose utilisation is known by construction, and API helpers."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f

GPU = "gpu.example.com"
MIG = "mig.example.com"
NET = "net.example.com"


def gpu_devices(count: int, **attrs: Any) -> list[dict[str, Any]]:
    return [
        f.device_entry(f"gpu-{i}", attributes=attrs, capacity={"memory": "80Gi"})
        for i in range(count)
    ]


@pytest.fixture(autouse=True)
def fast_passwords(settings) -> None:
    """Persona fixtures hash passwords; a fast hasher keeps hundreds of API tests quick."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def cluster(db) -> dict[tuple[str, str], Any]:
    """Two nodes, GPU, partitionable (MIG) and shared (NIC) pools, claims holding some devices.

    By construction: pool node-a (gpu) has gpu-0, gpu-1 allocated, gpu-2 tainted by a rule,
    gpu-3 tainted by its own taint, gpu-4 free; pool node-b (gpu) has gpu-0 held with admin
    access only and gpu-1 free; mig pool has 2 of 3 partitions allocated (20Gi and 2 slices of
    80Gi and 7); nic-0 is shared by two claims consuming 10G and 30G of 100G.
    """
    node_a_devices = [
        f.device_entry(
            f"gpu-{i}",
            attributes={"model": {"string": "h100"}, "index": {"int": i}},
            capacity={"memory": "80Gi"},
            taints=[{"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}]
            if i == 3
            else (),
        )
        for i in range(5)
    ]
    node_b_devices = gpu_devices(
        2,
        **{
            f"{GPU}/model": {"string": "a100"},
            "driverVersion": {"version": "1.2.3"},
            "ecc": {"bool": True},
        },
    )
    mig_devices = [
        f.device_entry("mig-1g-0", consumes={"gpu-0-counters": {"memory": "10Gi", "slices": "1"}}),
        f.device_entry("mig-1g-1", consumes={"gpu-0-counters": {"memory": "10Gi", "slices": "1"}}),
        f.device_entry("mig-7g", consumes={"gpu-0-counters": {"memory": "80Gi", "slices": "7"}}),
    ]
    objects = f.create(
        f.node_object("node-a"),
        f.node_object("node-b", ready=False),
        f.device_class_object(GPU, expression=f'device.driver == "{GPU}"'),
        f.device_class_object(
            "h100-only", expression=f'device.attributes["{GPU}"].model == "h100"'
        ),
        f.slice_object(
            "node-a-gpu", driver=GPU, pool="node-a", node="node-a", devices=node_a_devices
        ),
        f.slice_object(
            "node-b-gpu", driver=GPU, pool="node-b", node="node-b", devices=node_b_devices
        ),
        f.slice_object(
            "node-a-mig",
            driver=MIG,
            pool="node-a-mig",
            node="node-a",
            devices=mig_devices,
            counters={"gpu-0-counters": {"memory": "80Gi", "slices": "7"}},
        ),
        f.slice_object(
            "node-a-net",
            driver=NET,
            pool="node-a-net",
            node="node-a",
            devices=[f.device_entry("nic-0", capacity={"bandwidth": "100G"}, allow_multiple=True)],
        ),
        f.taint_rule_object("maintenance", driver=GPU, pool="node-a", device="gpu-2"),
        f.claim_object(
            "train-0",
            results=[f.allocation_result("req", driver=GPU, pool="node-a", device="gpu-0")],
            node="node-a",
            reserved_for=["train-0-pod"],
        ),
        f.claim_object(
            "train-1",
            results=[f.allocation_result("req", driver=GPU, pool="node-a", device="gpu-1")],
            node="node-a",
        ),
        f.claim_object(
            "monitor",
            namespace="team-b",
            results=[
                f.allocation_result(
                    "req", driver=GPU, pool="node-b", device="gpu-0", admin_access=True
                )
            ],
            node="node-b",
        ),
        f.claim_object("waiting", namespace="team-b", count=4),
        f.claim_object(
            "mig-a",
            device_class=MIG,
            results=[f.allocation_result("req", driver=MIG, pool="node-a-mig", device="mig-1g-0")],
        ),
        f.claim_object(
            "mig-b",
            device_class=MIG,
            results=[f.allocation_result("req", driver=MIG, pool="node-a-mig", device="mig-1g-1")],
        ),
        f.claim_object(
            "net-a",
            device_class=NET,
            results=[
                f.allocation_result(
                    "req",
                    driver=NET,
                    pool="node-a-net",
                    device="nic-0",
                    share_id="11111111-aaaa-bbbb-cccc-000000000001",
                    consumed={"bandwidth": "10G"},
                )
            ],
        ),
        f.claim_object(
            "net-b",
            namespace="team-b",
            device_class=NET,
            results=[
                f.allocation_result(
                    "req",
                    driver=NET,
                    pool="node-a-net",
                    device="nic-0",
                    share_id="11111111-aaaa-bbbb-cccc-000000000002",
                    consumed={"bandwidth": "30G"},
                )
            ],
        ),
        f.template_object("gpu-template", device_class=GPU),
        f.pod_object("train-0-pod", claim="train-0", node="node-a"),
        f.pod_object("pending-pod", namespace="team-b", claim="waiting", phase="Pending"),
        f.quota_object("gpus", hard={f"{GPU}.deviceclass.resource.k8s.io/devices": "4"}),
        f.resource_class_object("classic-gpu", driver="classic.example.com"),
        f.scheduling_context_object("pending-pod", namespace="team-b", node="node-a"),
    )
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def not_ready_claim(name: str, *, pool: str, device: str) -> dict[str, Any]:
    """A claim holding one GPU whose device status reports condition Ready=False."""
    claim = f.claim_object(
        name, results=[f.allocation_result("req", driver=GPU, pool=pool, device=device)]
    )
    claim["status"]["devices"] = [
        {
            "driver": GPU,
            "pool": pool,
            "device": device,
            "conditions": [{"type": "Ready", "status": "False", "reason": "XidError"}],
        }
    ]
    return claim


def results(response: Any) -> list[dict[str, Any]]:
    """The items of a list response, asserting it succeeded."""
    assert response.status_code == 200, response.content
    return response.json()["results"]


def names(response: Any, key: str = "name") -> list[str]:
    return [item[key] for item in results(response)]


@pytest.fixture
def token_api(viewer_user) -> APIClient:
    """A client authenticated with a REST framework token, as scripts use."""
    from rest_framework.authtoken.models import Token

    client = APIClient()
    token = Token.objects.create(user=viewer_user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def sync_rows(db) -> None:
    """Two SyncState rows and one object the sync skipped (through the real write path)."""
    from inventory.choices import Kind
    from inventory.models import SyncState
    from inventory.sync import upsert_events

    SyncState.objects.create(kind=Kind.RESOURCE_SLICE, served_version="v1", object_count=4)
    SyncState.objects.create(kind=Kind.NODE, served_version="v1", object_count=2)
    broken = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "broken", "uid": "broken-uid"},
        "spec": {"driver": 5, "pool": "not-a-mapping"},
    }
    result = upsert_events(Kind.RESOURCE_SLICE, [(broken, None)], publish=False)
    assert result.skipped
