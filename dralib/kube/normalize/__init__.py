"""Version normalizers: every served version of every kind into the internal v1 shape.

Pure functions, no Django. `normalize` checks one object as the API server sent it and returns a
new dict in the v1 shape; `to_version` goes back, so a fake API server can serve a v1 cluster as an
older version. The internal shape is the resource.k8s.io/v1 JSON, plus:

- fields the cluster sent that this code does not know, left where they were;
- a top-level `classic` mapping for what only driver-allocated DRA had: v1alpha2's
  resourceClassName, parametersRef, allocationMode, driverName, resourceHandles, availableOnNodes,
  shareable, deallocationRequested (and 1.30 slices' resourceModel), or 1.31 v1alpha3's
  controller, allocationController, deallocationRequested and DeviceClass suitableNodes.
  Classic claims have `spec: {}`; an allocated one has `status.allocation` with `devices: {}` and
  availableOnNodes copied to `nodeSelector`. A 1.30 slice is a single-slice pool named after its
  node, generation 0;
- kinds v1 lacks (ResourceClass, PodSchedulingContext, ResourceClaimParameters,
  ResourceClassParameters) keep apiVersion resource.k8s.io/v1alpha2, also when 1.31 served
  PodSchedulingContext as v1alpha3;
- core kinds (Node, Namespace, Pod, ResourceQuota, LimitRange) stay "v1"; pre-1.31
  `resourceClaims[].source` is flattened; PriorityClass, PodDisruptionBudget and Event stay
  scheduling.k8s.io/v1, policy/v1 and events.k8s.io/v1 (their one served version).
"""

from .errors import NormalizeError
from .registry import NAMESPACED_KINDS, SUPPORTED, normalize, to_version

__all__ = ["NAMESPACED_KINDS", "SUPPORTED", "NormalizeError", "normalize", "to_version"]
