"""What-if's stranded summary counts physical units as the availability does: a partitioned GPU
whose slices nobody can use is one unit, and a GPU with a slice in use is none."""

from __future__ import annotations

import yaml

from claims.whatif.service import what_if
from tests import factories as f

GPU = "gpu.example.com"


def mig_cluster(*, held: int = 0) -> None:
    """node-a: one MIG GPU (the whole device and seven 1g slices), `held` slices allocated."""
    f.create(
        f.node_object("node-a"),
        f.device_class_object("mig", expression=f'device.attributes["{GPU}"].type == "mig"'),
        *f.mig_gpu_slices("node-a", driver=GPU),
        *(
            f.claim_object(
                f"user-{slot}",
                device_class="mig",
                results=[
                    f.allocation_result("r", driver=GPU, pool="node-a", device=f"gpu-0-mig-{slot}")
                ],
                node="node-a",
            )
            for slot in range(held)
        ),
    )


def eight_slices() -> str:
    request = {"deviceClassName": "mig", "allocationMode": "ExactCount", "count": 8}
    return yaml.safe_dump(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "eight", "namespace": "team-a"},
            "spec": {"devices": {"requests": [{"name": "mig", "exactly": request}]}},
        }
    )


def test_a_stranded_partitioned_gpu_is_one_unit(db) -> None:
    """Eight slices fit nowhere: seven free slices are stranded, on one free GPU."""
    mig_cluster()
    stranded = what_if(eight_slices(), use_cache=False)["summary"]["stranded"]
    assert stranded["total"] == 7
    assert stranded["units"] == 1


def test_a_gpu_with_a_slice_in_use_is_no_free_unit(db) -> None:
    """With one slice held, six slices are stranded and no whole unit is free."""
    mig_cluster(held=1)
    stranded = what_if(eight_slices(), use_cache=False)["summary"]["stranded"]
    assert stranded["total"] == 6
    assert stranded["units"] == 0
