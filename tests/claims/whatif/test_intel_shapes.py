"""Intel's GPU DRA driver shapes: its DeviceClass, slices and a pasted Deployment, per pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from claims.whatif.service import what_if
from tests.claims.whatif.conftest import load_objects

FIXTURES = Path(__file__).parent / "fixtures"
DRIVER = "gpu.intel.com"


def intel_cluster() -> list[dict]:
    """Two nodes, each with one 16 GiB GPU and one 2 GiB GPU, as the driver publishes them."""
    objects: list[dict] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER, "uid": "class-intel"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    ]
    for index in (1, 2):
        node = f"worker-{index}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "uid": f"uid-{node}", "labels": {}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        devices = [
            {
                "name": f"card{card}-0x56c0",
                "attributes": {
                    "model": {"string": "Flex 170"},
                    "family": {"string": "Data Center Flex"},
                    "pciId": {"string": "0x56c0"},
                    "sriov": {"bool": True},
                },
                "capacity": {"memory": {"value": memory}, "millicores": {"value": "1k"}},
            }
            for card, memory in ((0, "16Gi"), (1, "2Gi"))
        ]
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpu.intel.com", "uid": f"slice-{node}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return objects


@pytest.mark.django_db
def test_intel_deployment_pasted_unchanged_is_answered_per_pod() -> None:
    """Three replicas over two nodes with one 4 GiB-capable GPU each: two fit, one does not."""
    load_objects(intel_cluster())
    answer = what_if((FIXTURES / "intel-gpu-deployment.yaml").read_text(), use_cache=False)
    pods = answer["pods"]
    assert len(pods) == 3
    assert all(str(pod["pod"]).split("/")[-1].startswith("gpu-test-") for pod in pods)
    placed = [pod for pod in pods if pod["fits"]]
    assert len(placed) == 2
    assert {pod["node"] for pod in placed} == {"worker-1", "worker-2"}
    devices = {d["device"] for pod in placed for c in pod["claims"] for d in c["devices"]}
    assert devices == {"card0-0x56c0"}  # only the 16 GiB cards pass the memory selector
    assert answer["fits"] is False
