"""Pure-Python port of Kubernetes' structured allocator (k8s.io/dynamic-resource-allocation).

Build an `Allocator` once from device classes, ResourceSlices, allocated state and features, then
ask it per node; or run a whole scenario in the shared conformance format with
`allocate_scenario`. Nothing here imports Django.
"""

from dralib.allocator.allocator import (
    Allocator,
    allocate_scenario,
    allocator_from_scenario,
)
from dralib.allocator.explain import RequestReport, StageCount, explain
from dralib.allocator.limits import ALLOCATION_RESULTS_MAX_SIZE
from dralib.allocator.nodeselection import NodeInfo
from dralib.allocator.pools import SliceCache
from dralib.allocator.selection import SelectorCache
from dralib.allocator.types import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    DeviceID,
    Features,
    NodeAllocationError,
    ScenarioError,
)

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "AllocatedState",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "DeviceID",
    "Features",
    "NodeAllocationError",
    "NodeInfo",
    "RequestReport",
    "ScenarioError",
    "SelectorCache",
    "SliceCache",
    "StageCount",
    "allocate_scenario",
    "allocator_from_scenario",
    "explain",
]
